package reconcile_test

import (
	"context"
	"strings"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"recond.dev/recond/reconcile"
	"recond.dev/recond/reconcile/diff"
)

var metaGet = metav1.GetOptions{}

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }

const (
	configMapYAML = `apiVersion: v1
kind: ConfigMap
metadata:
  name: web-config
data:
  greeting: hello
`
	serviceYAML = `apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector:
    app: web
  ports:
    - port: 80
      targetPort: 8080
`
	// A Deployment that sets none of the fields the server defaults.
	deploymentYAML = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels:
    app: web
spec:
  replicas: 2
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
        - name: web
          image: nginx:1.27
          ports:
            - containerPort: 8080
          env:
            - name: MODE
              value: demo
          resources:
            requests:
              cpu: 0.5
              memory: 64Mi
`
)

func app() map[string]string {
	return map[string]string{"configmap.yaml": configMapYAML, "service.yaml": serviceYAML, "deployment.yaml": deploymentYAML}
}

func TestFirstSyncCreatesEverythingThenConverges(t *testing.T) {
	h := newHarness(t)
	sha := h.repo.Commit("app", app())
	r := h.mustTick(reconcile.OutcomeApplied)
	if r.Revision != sha {
		t.Errorf("revision = %s, want %s", r.Revision, sha)
	}
	want := reconcile.Counts{Desired: 3, Drifted: 3, Created: 3, Managed: 3}
	if r.Counts != want {
		t.Errorf("counts = %+v, want %+v", r.Counts, want)
	}
	// Dependency order: ConfigMap, Service, Deployment.
	var order []string
	for _, op := range r.Ops {
		order = append(order, op.Kind)
	}
	if got := strings.Join(order, ","); got != "ConfigMap,Service,Deployment" {
		t.Errorf("apply order = %s", got)
	}
	for _, o := range []struct {
		gvr  any
		name string
		obj  *unstructured.Unstructured
	}{
		{gvrConfigMap, "web-config", h.get(gvrConfigMap, "web-config")},
		{gvrService, "web", h.get(gvrService, "web")},
		{gvrDeployment, "web", h.get(gvrDeployment, "web")},
	} {
		if o.obj == nil {
			t.Fatalf("%v %s not created", o.gvr, o.name)
		}
		l, a := o.obj.GetLabels(), o.obj.GetAnnotations()
		if l["app.kubernetes.io/managed-by"] != "recond" || l["recond.dev/instance"] != "recond" {
			t.Errorf("%s labels = %v", o.name, l)
		}
		if a["recond.dev/revision"] != sha {
			t.Errorf("%s revision annotation = %q, want %s", o.name, a["recond.dev/revision"], sha)
		}
		if a["recond.dev/source"] != h.repo.URL()+"#." {
			t.Errorf("%s source annotation = %q", o.name, a["recond.dev/source"])
		}
		for _, mf := range o.obj.GetManagedFields() {
			if mf.Manager != "recond" || mf.Operation != metav1.ManagedFieldsOperationApply {
				t.Errorf("%s managed by %s/%s, want recond/Apply only", o.name, mf.Manager, mf.Operation)
			}
		}
	}
	// The Deployment sets no defaulted field and cpu 0.5 comes back as 500m:
	// still no difference.
	r = h.mustTick(reconcile.OutcomeConverged)
	if len(r.Ops) != 0 || r.Counts.Drifted != 0 || r.Counts.Managed != 3 {
		t.Errorf("converged tick: ops %v counts %+v", r.Ops, r.Counts)
	}
	if r.Fetched {
		t.Errorf("a local repository is never fetched")
	}
}

func TestScaleDriftIsHealed(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit("app", app())
	h.mustTick(reconcile.OutcomeApplied)

	ctx := context.Background()
	scale := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: h.ns}, Spec: autoscalingv1.ScaleSpec{Replicas: 5}}
	if _, err := cp.Client.AppsV1().Deployments(h.ns).UpdateScale(ctx, "web", scale, metav1.UpdateOptions{FieldManager: "kubectl"}); err != nil {
		t.Fatal(err)
	}
	r := h.mustTick(reconcile.OutcomeApplied)
	if len(r.Changes) != 1 {
		t.Fatalf("changes = %v, want one", r.Changes)
	}
	c := r.Changes[0]
	wantField := diff.FieldDiff{Path: "spec.replicas", Live: int64(5), Desired: int64(2)}
	if c.Kind != "Deployment" || c.Action != diff.Update || len(c.Fields) != 1 || !sameField(c.Fields[0], wantField) {
		t.Errorf("change = %s, want Deployment/web spec.replicas: 5 -> 2", c)
	}
	if got, _, _ := unstructured.NestedInt64(h.get(gvrDeployment, "web").Object, "spec", "replicas"); got != 2 {
		t.Errorf("replicas after heal = %d, want 2", got)
	}
	if r.Counts.Updated != 1 || r.Counts.Created != 0 {
		t.Errorf("counts = %+v", r.Counts)
	}
	h.mustTick(reconcile.OutcomeConverged)
}

func sameField(a, b diff.FieldDiff) bool {
	return a.Path == b.Path && toInt(a.Live) == toInt(b.Live) && toInt(a.Desired) == toInt(b.Desired)
}

func toInt(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case int:
		return int64(n)
	case float64:
		return int64(n)
	}
	return -1
}

func TestEditOfSetFieldIsDriftButForeignLabelIsNot(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit("app", app())
	h.mustTick(reconcile.OutcomeApplied)
	ctx := context.Background()

	// Another manager adds a label the manifest does not set: not drift.
	patch := []byte(`{"metadata":{"labels":{"team":"payments"}}}`)
	if _, err := h.dyn.Resource(gvrConfigMap).Namespace(h.ns).Patch(ctx, "web-config", types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kubectl-label"}); err != nil {
		t.Fatal(err)
	}
	h.mustTick(reconcile.OutcomeConverged)

	// kubectl edit of a field the manifest sets: drift, healed; the foreign
	// label stays.
	patch = []byte(`{"data":{"greeting":"edited"}}`)
	if _, err := h.dyn.Resource(gvrConfigMap).Namespace(h.ns).Patch(ctx, "web-config", types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	r := h.mustTick(reconcile.OutcomeApplied)
	if len(r.Changes) != 1 || r.Changes[0].String() != `ConfigMap/web-config data.greeting: "edited" -> "hello"` {
		t.Errorf("changes = %v", r.Changes)
	}
	cm := h.get(gvrConfigMap, "web-config")
	if g, _, _ := unstructured.NestedString(cm.Object, "data", "greeting"); g != "hello" {
		t.Errorf("greeting = %q after heal", g)
	}
	if cm.GetLabels()["team"] != "payments" {
		t.Errorf("foreign label removed: %v", cm.GetLabels())
	}
}

func TestDeletedObjectIsRecreated(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit("app", app())
	h.mustTick(reconcile.OutcomeApplied)
	if err := h.dyn.Resource(gvrService).Namespace(h.ns).Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	r := h.mustTick(reconcile.OutcomeApplied)
	if r.Counts.Created != 1 || len(r.Changes) != 1 || r.Changes[0].Action != diff.Create {
		t.Errorf("changes %v counts %+v", r.Changes, r.Counts)
	}
	if h.get(gvrService, "web") == nil {
		t.Error("service not recreated")
	}
}

func TestNewCommitRewritesOnlyChangedObjects(t *testing.T) {
	h := newHarness(t)
	first := h.repo.Commit("app", app())
	h.mustTick(reconcile.OutcomeApplied)
	second := h.repo.Commit("bump image", map[string]string{
		"deployment.yaml": strings.Replace(deploymentYAML, "nginx:1.27", "nginx:1.28", 1),
	})
	r := h.mustTick(reconcile.OutcomeApplied)
	if r.Revision != second || r.Counts.Updated != 1 || r.Counts.Created != 0 {
		t.Fatalf("revision %s counts %+v", r.Revision, r.Counts)
	}
	if got := h.get(gvrDeployment, "web").GetAnnotations()["recond.dev/revision"]; got != second {
		t.Errorf("deployment revision = %s, want %s", got, second)
	}
	for _, o := range []*unstructured.Unstructured{h.get(gvrConfigMap, "web-config"), h.get(gvrService, "web")} {
		if got := o.GetAnnotations()["recond.dev/revision"]; got != first {
			t.Errorf("%s/%s revision = %s, want unchanged %s", o.GetKind(), o.GetName(), got, first)
		}
	}
	img, _, _ := unstructured.NestedSlice(h.get(gvrDeployment, "web").Object, "spec", "template", "spec", "containers")
	if img[0].(map[string]any)["image"] != "nginx:1.28" {
		t.Errorf("image = %v", img[0])
	}
	h.mustTick(reconcile.OutcomeConverged)
}

func TestFieldRemovedFromGitIsRemoved(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit("app", app())
	h.mustTick(reconcile.OutcomeApplied)
	h.repo.Commit("drop env", map[string]string{
		"deployment.yaml": strings.Replace(deploymentYAML, "          env:\n            - name: MODE\n              value: demo\n", "", 1),
	})
	r := h.mustTick(reconcile.OutcomeApplied)
	if r.Counts.Updated != 1 {
		t.Fatalf("counts %+v changes %v", r.Counts, r.Changes)
	}
	cs, _, _ := unstructured.NestedSlice(h.get(gvrDeployment, "web").Object, "spec", "template", "spec", "containers")
	if env, ok := cs[0].(map[string]any)["env"]; ok {
		t.Errorf("env still set: %v", env)
	}
	h.mustTick(reconcile.OutcomeConverged)
}

func TestRemovedFileIsPruned(t *testing.T) {
	for _, prune := range []bool{true, false} {
		t.Run(map[bool]string{true: "prune", false: "no-prune"}[prune], func(t *testing.T) {
			h := newHarness(t)
			h.cfg.Prune = prune
			h.repo.Commit("app", app())
			h.mustTick(reconcile.OutcomeApplied)
			h.repo.Commit("drop service", map[string]string{"service.yaml": ""})
			if prune {
				r := h.mustTick(reconcile.OutcomeApplied)
				if r.Counts.Pruned != 1 || r.Counts.Managed != 2 {
					t.Errorf("counts %+v", r.Counts)
				}
				if h.get(gvrService, "web") != nil {
					t.Error("service not pruned")
				}
			} else {
				r := h.mustTick(reconcile.OutcomeConverged)
				if r.Counts.Pruned != 0 {
					t.Errorf("counts %+v", r.Counts)
				}
				if h.get(gvrService, "web") == nil {
					t.Error("service pruned with prune off")
				}
			}
		})
	}
}

// A kind that left Git entirely is still listed (from the inventory) and its
// objects pruned, even by a new process that never applied it.
func TestKindThatLeftGitIsPrunedAfterRestart(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit("app", app())
	h.mustTick(reconcile.OutcomeApplied)
	h.repo.Commit("only the deployment", map[string]string{"service.yaml": "", "configmap.yaml": ""})
	h.rec = nil // a restarted recond: nothing in memory
	r := h.mustTick(reconcile.OutcomeApplied)
	if r.Counts.Pruned != 2 {
		t.Fatalf("pruned %d, want 2 (changes %v)", r.Counts.Pruned, r.Changes)
	}
	if h.get(gvrService, "web") != nil || h.get(gvrConfigMap, "web-config") != nil {
		t.Error("objects of kinds no longer in Git were not pruned")
	}
}

func TestUnownedObjectIsNotPrunedButAdopted(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	// An object someone made by hand, with the same name as one in Git.
	cm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "web-config"}, "data": map[string]any{"greeting": "by hand"},
	}}
	if _, err := h.dyn.Resource(gvrConfigMap).Namespace(h.ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	other := cm.DeepCopy()
	other.SetName("not-in-git")
	if _, err := h.dyn.Resource(gvrConfigMap).Namespace(h.ns).Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.repo.Commit("cm", map[string]string{"configmap.yaml": configMapYAML})
	r := h.mustTick(reconcile.OutcomeApplied)
	if r.Counts.Updated != 1 || r.Counts.Created != 0 || r.Counts.Pruned != 0 {
		t.Errorf("counts %+v", r.Counts)
	}
	if h.get(gvrConfigMap, "not-in-git") == nil {
		t.Error("an object recond never owned was pruned")
	}
	if g, _, _ := unstructured.NestedString(h.get(gvrConfigMap, "web-config").Object, "data", "greeting"); g != "hello" {
		t.Errorf("greeting %q: not adopted", g)
	}
}

func TestSecretStringDataConverges(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit("secret", map[string]string{"secret.yaml": `apiVersion: v1
kind: Secret
metadata:
  name: creds
stringData:
  password: s3cret
`})
	h.mustTick(reconcile.OutcomeApplied)
	// stringData comes back as data: the local comparison cannot decide, a
	// dry run confirms there is nothing to write.
	h.mustTick(reconcile.OutcomeConverged)
	h.repo.Commit("rotate", map[string]string{"secret.yaml": `apiVersion: v1
kind: Secret
metadata:
  name: creds
stringData:
  password: n3w
`})
	h.mustTick(reconcile.OutcomeApplied)
	data, _, _ := unstructured.NestedStringMap(h.get(gvrSecret, "creds").Object, "data")
	if data["password"] != "bjN3" { // base64("n3w")
		t.Errorf("data = %v", data)
	}
	h.mustTick(reconcile.OutcomeConverged)
}
