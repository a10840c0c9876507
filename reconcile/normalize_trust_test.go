package reconcile_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/reconcile"
)

// Manifests whose values the API server rewrites into its canonical form:
// quantities outside the fields named limits, requests or hard.
const (
	// From kubernetes-engine-samples: an external metric target written as
	// a plain number string, which the server stores as "30k".
	hpaQueueYAML = `apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: queue
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: worker}
  minReplicas: 1
  maxReplicas: 5
  metrics:
  - type: External
    external:
      metric:
        name: queue_depth
      target:
        type: AverageValue
        averageValue: "30000"
`
	// A number where the server keeps the string "2".
	hpaPubsubYAML = `apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: pubsub
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: worker}
  minReplicas: 1
  maxReplicas: 5
  metrics:
  - type: External
    external:
      metric:
        name: pubsub.googleapis.com|subscription|num_undelivered_messages
      target:
        type: AverageValue
        averageValue: 2
`
	limitRangeYAML = `apiVersion: v1
kind: LimitRange
metadata:
  name: limits
spec:
  limits:
  - type: Container
    default:
      cpu: "0.5"
      memory: 1073741824
    defaultRequest:
      cpu: 0.25
      memory: 0.5Gi
    max:
      cpu: "2.0"
    maxLimitRequestRatio:
      cpu: 4
`
	widgetYAML = `apiVersion: normalize.recond.dev/v1
kind: Widget
metadata:
  name: w
spec:
  size: 0.5Gi
  port: 8080
`
)

// TestCanonicalisedValuesConverge syncs objects whose values the server
// canonicalises by type (quantities in HPA targets and LimitRange limits,
// a custom resource's int-or-string quantity): after the first sync, ticks
// find nothing to write.
func TestCanonicalisedValuesConverge(t *testing.T) {
	h := newHarness(t)
	installWidgetCRD(t, h)
	h.repo.Commit("canonical values", map[string]string{
		"hpa-queue.yaml": hpaQueueYAML, "hpa-pubsub.yaml": hpaPubsubYAML,
		"limitrange.yaml": limitRangeYAML, "widget.yaml": widgetYAML,
	})
	r := h.mustTick(reconcile.OutcomeApplied)
	if r.Counts.Created != 4 {
		t.Fatalf("first sync created %d objects, want 4 (counts %+v)", r.Counts.Created, r.Counts)
	}
	// The server did rewrite them: otherwise this test proves nothing.
	hpa := h.get(schema.GroupVersionResource{Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers"}, "queue")
	if v, _, _ := unstructured.NestedSlice(hpa.Object, "spec", "metrics"); len(v) == 0 ||
		v[0].(map[string]any)["external"].(map[string]any)["target"].(map[string]any)["averageValue"] != "30k" {
		t.Fatalf("the server kept averageValue as %v, want it canonicalised to 30k", v)
	}
	for i := range 3 {
		r := h.mustTick(reconcile.OutcomeConverged)
		if len(r.Ops) != 0 || r.Counts.Drifted != 0 {
			t.Errorf("tick %d after the first sync: ops %v, counts %+v, changes %v", i+1, r.Ops, r.Counts, r.Changes)
		}
		// Converged by the comparison itself, which knows the field types,
		// not by the memory of a server answer that hides a gap.
		if r.Counts.Equivalent != 0 {
			t.Errorf("tick %d: the local comparison still differs for %v (only the server's earlier answer holds them)", i+1, r.Equivalent)
		}
	}
}

// installWidgetCRD installs the Widget CRD and waits until it is served.
func installWidgetCRD(t *testing.T, h *harness) {
	t.Helper()
	testenv.InstallCRD(t, h.dyn, testenv.CRDInGroup(t, "widget-intorstring", "normalize.recond.dev"))
}
