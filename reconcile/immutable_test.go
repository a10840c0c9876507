package reconcile_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"recond.dev/recond/reconcile"
)

var gvrPVC = schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}

// playGC removes the foregroundDeletion finalizer of objects being deleted
// in the harness's namespace, as the garbage collector does once their
// dependents are gone (the test bed runs no controllers), until ctx ends.
func (h *harness) playGC(ctx context.Context, gvr schema.GroupVersionResource) {
	go func() {
		for ctx.Err() == nil {
			l, err := h.dyn.Resource(gvr).Namespace(h.ns).List(ctx, metav1.ListOptions{})
			if err == nil {
				for _, u := range l.Items {
					if u.GetDeletionTimestamp() != nil && len(u.GetFinalizers()) > 0 {
						u.SetFinalizers(nil)
						_, _ = h.dyn.Resource(gvr).Namespace(h.ns).Update(ctx, &u, metav1.UpdateOptions{})
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
}

// newSelector is deploymentYAML with another selector (an immutable
// field), and annotations ann.
func newSelector(ann string) string {
	d := strings.ReplaceAll(deploymentYAML, "app: web", "app: web2")
	if ann != "" {
		d = strings.Replace(d, "  labels:\n", "  annotations:\n    "+ann+"\n  labels:\n", 1)
	}
	return d
}

// A change to an immutable field fails apply with reason immutable, naming
// the object and the field, and nothing of the commit is written; with
// recond.dev/force: recreate the object is deleted (foreground) and created
// anew within the tick. Without the recreate (immutable's force branch) the
// second commit fails like the first.
func TestImmutableFieldAndForceRecreate(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit("app", map[string]string{"deployment.yaml": deploymentYAML, "configmap.yaml": configMapYAML})
	h.mustTick(reconcile.OutcomeApplied)
	uid := h.get(gvrDeployment, "web").GetUID()

	h.repo.Commit("new selector", map[string]string{"deployment.yaml": newSelector(""),
		"configmap.yaml": strings.Replace(configMapYAML, "hello", "bonjour", 1)})
	r := h.tick()
	f := r.Failure()
	var ie *reconcile.ImmutableError
	if f == nil || f.Phase != reconcile.PhaseApply || f.Reason != reconcile.ReasonImmutable || !errors.As(f, &ie) {
		t.Fatalf("failure %v, want apply failed with reason immutable", f)
	}
	if ie.Kind != "Deployment" || ie.Name != "web" || !strings.Contains(strings.Join(ie.Fields, " "), "spec.selector") ||
		!strings.Contains(f.Error(), reconcile.AnnotationForce+": recreate") {
		t.Errorf("immutable error %q (fields %v): want Deployment/web, spec.selector and the way out", f.Error(), ie.Fields)
	}
	if got := h.get(gvrConfigMap, "web-config").Object["data"].(map[string]any)["greeting"]; got != "hello" {
		t.Errorf("the commit's other change was written: greeting %v", got)
	}

	h.repo.Commit("recreate", map[string]string{"deployment.yaml": newSelector(reconcile.AnnotationForce + ": recreate")})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h.playGC(ctx, gvrDeployment)
	r = h.mustTick(reconcile.OutcomeApplied)
	d := h.get(gvrDeployment, "web")
	if d.GetUID() == uid {
		t.Fatal("the Deployment was not recreated")
	}
	if sel := d.Object["spec"].(map[string]any)["selector"].(map[string]any)["matchLabels"].(map[string]any)["app"]; sel != "web2" {
		t.Errorf("selector %v after the recreate, want web2", sel)
	}
	recreated := false
	for _, op := range r.Ops {
		recreated = recreated || op.Kind == "Deployment" && op.Recreated && op.Err == nil
	}
	if !recreated {
		t.Errorf("no recreated operation in %+v", r.Ops)
	}
	if got := h.get(gvrConfigMap, "web-config").Object["data"].(map[string]any)["greeting"]; got != "bonjour" {
		t.Errorf("greeting %v after the recreate tick, want bonjour", got)
	}
	h.mustTick(reconcile.OutcomeConverged)
}

// recond.dev/force: recreate is never applied to a PersistentVolumeClaim:
// its data would go with it.
func TestForceRecreateNeverDeletesAClaim(t *testing.T) {
	h := newHarness(t)
	pvc := func(size, ann string) string {
		return "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\n" + ann +
			"spec:\n  accessModes: [ReadWriteOnce]\n  storageClassName: " + size + "\n  resources:\n    requests:\n      storage: 1Gi\n"
	}
	h.repo.Commit("app", map[string]string{"pvc.yaml": pvc("a", "")})
	h.mustTick(reconcile.OutcomeApplied)
	uid := h.get(gvrPVC, "data").GetUID()
	h.repo.Commit("another class", map[string]string{"pvc.yaml": pvc("b", "  annotations:\n    "+reconcile.AnnotationForce+": recreate\n")})
	r := h.tick()
	f := r.Failure()
	if f == nil || f.Reason != reconcile.ReasonImmutable || !strings.Contains(f.Error(), "never applied to a PersistentVolumeClaim") {
		t.Fatalf("failure %v, want immutable, refusing to recreate the claim", f)
	}
	if got := h.get(gvrPVC, "data"); got == nil || got.GetUID() != uid {
		t.Fatal("the claim was deleted")
	}
}

// A refusal that is about an immutable field and about something else (a
// selector changed without the template's labels) is not recreated:
// deleting the object would be followed by a create refused for the same
// reason. Without the every-cause rule (cluster.ImmutableFields' all) the
// Deployment is deleted.
func TestForceRecreateOnlyWhenOnlyImmutable(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit("app", map[string]string{"deployment.yaml": deploymentYAML})
	h.mustTick(reconcile.OutcomeApplied)
	uid := h.get(gvrDeployment, "web").GetUID()
	bad := strings.Replace(deploymentYAML, "  selector:\n    matchLabels:\n      app: web\n", "  selector:\n    matchLabels:\n      app: other\n", 1)
	if bad == deploymentYAML {
		t.Fatal("fixture: selector not found")
	}
	bad = strings.Replace(bad, "  labels:\n", "  annotations:\n    "+reconcile.AnnotationForce+": recreate\n  labels:\n", 1)
	h.repo.Commit("selector only", map[string]string{"deployment.yaml": bad})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h.playGC(ctx, gvrDeployment)
	r := h.tick()
	if f := r.Failure(); f == nil || f.Reason != reconcile.ReasonInvalid {
		t.Fatalf("failure %v, want invalid (the selector no longer matches the template)", f)
	}
	if d := h.get(gvrDeployment, "web"); d == nil || d.GetUID() != uid {
		t.Fatal("the Deployment was deleted for a recreate that could not succeed")
	}
}
