package schema_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/reconcile/diff"
	"recond.dev/recond/reconcile/schema"
)

var cp *testenv.ControlPlane

func TestMain(m *testing.M) { os.Exit(testenv.RunTests(m, &cp)) }

// externalHPA is a HorizontalPodAutoscaler on one external metric, whose
// averageValue the server rewrites.
func externalHPA(name, metric, averageValue string) string {
	return fmt.Sprintf(`apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: %s}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: worker}
  maxReplicas: 5
  metrics:
  - type: External
    external:
      metric: {name: %s}
      target: {type: AverageValue, averageValue: %s}
`, name, metric, averageValue)
}

// objects the server rewrites: each as Git has it.
var objects = []string{externalHPA("queue", "queue_depth", "30000"), externalHPA("pubsub", "pubsub_undelivered", "2"), `apiVersion: v1
kind: LimitRange
metadata: {name: limits}
spec:
  limits:
  - type: Container
    default: {cpu: 0.5, memory: 1073741824}
    defaultRequest: {cpu: 250m, memory: 0.5Gi}
    max: {cpu: "2.0"}
`}

// TestServerDocuments diffs objects as Git has them against what the API
// server made of them, with the field types of the server's own documents:
// no difference, where the rules by name see one.
func TestServerDocuments(t *testing.T) {
	cp.Require(t)
	ns := cp.Namespace(t)
	ctx := context.Background()
	dyn := dynamic.NewForConfigOrDie(cp.Config)
	types, err := schema.New(cp.Config)
	if err != nil {
		t.Fatal(err)
	}

	desired := decodeAll(t, objects)
	// Warm the cache before the CRD exists: its kind must be found later.
	var kinds []kschema.GroupVersionKind
	for _, d := range desired {
		kinds = append(kinds, d.GroupVersionKind())
	}
	if err := types.Prepare(ctx, kinds); err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	testenv.InstallCRD(t, dyn, testenv.CRD(t, "widget-intorstring"))
	desired = append(desired, decodeAll(t, []string{"apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {size: 1Gi, port: 8080}\n"})...)
	kinds = append(kinds, desired[len(desired)-1].GroupVersionKind())
	// The server publishes a new CRD's document a moment after it is
	// established.
	deadline := time.Now().Add(30 * time.Second)
	for !types.Known(kinds[len(kinds)-1]) {
		if time.Now().After(deadline) {
			t.Fatalf("the Widget kind never appeared in the server's documents")
		}
		types.Invalidate()
		if err := types.Prepare(ctx, kinds); err != nil {
			t.Fatalf("Prepare: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	for _, d := range desired {
		gvk := d.GroupVersionKind()
		gvr, _ := metaResource(gvk)
		body, err := d.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		live, err := dyn.Resource(gvr).Namespace(ns).Patch(ctx, d.GetName(), applyPatch, body,
			metav1.PatchOptions{FieldManager: "recond", Force: ptr(true)})
		if err != nil {
			t.Fatalf("apply %s/%s: %v", gvk.Kind, d.GetName(), err)
		}
		opts := diff.Options{Manager: "recond", Types: types}
		if c := diff.Object(d, live, opts); c.Action != diff.Unchanged {
			t.Errorf("with the server's field types: %s", c)
		}
		if gvk.Kind != "Widget" {
			// The gap the documents close: the name rules see a difference.
			if c := diff.Object(d, live, diff.Options{Manager: "recond"}); c.Action != diff.Update {
				t.Errorf("%s/%s without field types: %s, want an update (is the fixture still rewritten?)", gvk.Kind, d.GetName(), c)
			}
		}
	}
	if got := types.TypeOf(kinds[len(kinds)-1], []string{"spec", "port"}); got != diff.FieldIntOrString {
		t.Errorf("Widget spec.port = %s, want int-or-string", got)
	}
}

var applyPatch = types.ApplyPatchType

func ptr[T any](v T) *T { return &v }

func metaResource(gvk kschema.GroupVersionKind) (kschema.GroupVersionResource, bool) {
	plural := map[string]string{"HorizontalPodAutoscaler": "horizontalpodautoscalers", "LimitRange": "limitranges", "Widget": "widgets"}
	p, ok := plural[gvk.Kind]
	return gvk.GroupVersion().WithResource(p), ok
}

// decodeAll decodes manifests as recond reads them from Git.
func decodeAll(t *testing.T, srcs []string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, s := range srcs {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(s), &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out
}
