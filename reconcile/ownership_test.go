package reconcile_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/reconcile"
)

// instance returns a second harness in the same namespace as h, for
// instance name, with a repository of its own.
func (h *harness) instance(name string) *harness {
	other := *h
	other.repo = testenv.NewRepo(h.t)
	other.url = other.repo.URL()
	other.cfg.Name = name
	other.rec = nil
	return &other
}

// An object that another instance owns is never adopted, written or pruned:
// Git naming it fails the diff with reason conflict, naming the object and
// its owner, and the other instance keeps converging.
func TestObjectOfAnotherInstanceIsNeverAdopted(t *testing.T) {
	b := newHarness(t)
	b.cfg.Name = "b"
	b.repo.Commit("b's app", map[string]string{"configmap.yaml": configMapYAML})
	b.mustTick(reconcile.OutcomeApplied)
	before := b.get(gvrConfigMap, "web-config")

	a := b.instance("a")
	a.repo.Commit("a names b's object", map[string]string{
		"service.yaml":   serviceYAML,
		"configmap.yaml": strings.Replace(configMapYAML, "hello", "taken over", 1),
	})
	r := a.tick()
	expectFailure(t, r, reconcile.PhaseDiff, reconcile.ReasonConflict, "ConfigMap/web-config", "instance b")
	after := b.get(gvrConfigMap, "web-config")
	if after.GetUID() != before.GetUID() || after.GetResourceVersion() != before.GetResourceVersion() {
		t.Errorf("b's ConfigMap was written by a (resourceVersion %s -> %s)", before.GetResourceVersion(), after.GetResourceVersion())
	}
	if got := after.GetLabels()[reconcile.LabelInstance]; got != "b" {
		t.Errorf("b's ConfigMap is labelled instance %q", got)
	}
	if a.get(gvrService, "web") != nil {
		t.Error("a wrote its other objects in the tick that found the conflict")
	}
	b.mustTick(reconcile.OutcomeConverged)

	// Once a's Git stops naming it, a applies the rest; b's object stays.
	a.repo.Commit("a lets go", map[string]string{"configmap.yaml": ""})
	a.mustTick(reconcile.OutcomeApplied)
	a.mustTick(reconcile.OutcomeConverged)
	if got := b.get(gvrConfigMap, "web-config"); got == nil || got.GetResourceVersion() != before.GetResourceVersion() {
		t.Error("b's ConfigMap changed after a let it go")
	}
	b.mustTick(reconcile.OutcomeConverged)
}

// Names recond keeps for itself are refused in read, whatever the kind, so
// that no repository can overwrite an instance's inventory or Lease.
func TestReservedNamesAreRefusedInRead(t *testing.T) {
	for _, name := range []string{"recond-inventory-b", "recond-inventory-recond", "recond-leader-b"} {
		t.Run(name, func(t *testing.T) {
			b := newHarness(t)
			b.cfg.Name = "b"
			b.repo.Commit("b", map[string]string{"configmap.yaml": configMapYAML})
			b.mustTick(reconcile.OutcomeApplied)
			inv := b.get(gvrConfigMap, "recond-inventory-b")

			a := b.instance("recond")
			a.repo.Commit("overwrite b's inventory", map[string]string{
				"service.yaml": serviceYAML,
				"inv.yaml":     "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\ndata:\n  kinds: \"\"\n",
			})
			r := a.tick()
			expectFailure(t, r, reconcile.PhaseRead, reconcile.ReasonInvalid, "inv.yaml", "ConfigMap/"+name, "recond's own")
			if got := b.get(gvrConfigMap, "recond-inventory-b"); got.GetResourceVersion() != inv.GetResourceVersion() {
				t.Error("b's inventory was overwritten")
			}
			b.mustTick(reconcile.OutcomeConverged)
		})
	}
}

// The inventory's parser rejects a line it cannot read: the observe phase
// fails with reason invalid and nothing is pruned, instead of forgetting a
// kind (whose objects would then never be pruned).
func TestUnreadableInventoryFailsObserve(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit("app", app())
	h.mustTick(reconcile.OutcomeApplied)
	h.repo.Commit("drop the service", map[string]string{"service.yaml": ""})
	for _, bad := range []string{"v1 ConfigMap\nnot-a-kind-line", "apps/v1/x Deployment", "v1 Config Map"} {
		inv := h.get(gvrConfigMap, "recond-inventory-recond")
		if err := unstructured.SetNestedField(inv.Object, bad, "data", "kinds"); err != nil {
			t.Fatal(err)
		}
		if _, err := h.dyn.Resource(gvrConfigMap).Namespace(h.ns).Update(context.Background(), inv, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		h.rec = nil // a restarted process reads the inventory again
		r := h.tick()
		expectFailure(t, r, reconcile.PhaseObserve, reconcile.ReasonInvalid, "recond-inventory-recond", "line")
		if h.get(gvrService, "web") == nil {
			t.Fatalf("inventory %q: the service was pruned", bad)
		}
	}
}

// A pruned object that a finalizer holds is terminating: deleted once,
// counted and reported until it is gone, never "pruned" again.
func TestTerminatingObjectIsPrunedOnce(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit("app", app())
	h.mustTick(reconcile.OutcomeApplied)
	patch := []byte(`{"metadata":{"finalizers":["example.com/hold"]}}`)
	if _, err := h.dyn.Resource(gvrService).Namespace(h.ns).Patch(context.Background(), "web", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	h.repo.Commit("drop the service", map[string]string{"service.yaml": ""})
	if r := h.mustTick(reconcile.OutcomeApplied); r.Counts.Pruned != 1 {
		t.Fatalf("pruned %d, want 1", r.Counts.Pruned)
	}
	if svc := h.get(gvrService, "web"); svc == nil || svc.GetDeletionTimestamp() == nil {
		t.Fatal("the service should be terminating, held by its finalizer")
	}
	for range 3 {
		r := h.mustTick(reconcile.OutcomeConverged)
		if r.Counts.Pruned != 0 || len(r.Ops) != 0 || r.Counts.Terminating != 1 {
			t.Fatalf("pruned %d, ops %v, terminating %d: want 0, none, 1", r.Counts.Pruned, r.Ops, r.Counts.Terminating)
		}
		if len(r.Terminating) != 1 || r.Terminating[0] != "Service/web" {
			t.Fatalf("terminating objects %v, want [Service/web]", r.Terminating)
		}
	}
	if _, err := h.dyn.Resource(gvrService).Namespace(h.ns).Patch(context.Background(), "web", types.MergePatchType,
		[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if r := h.mustTick(reconcile.OutcomeConverged); r.Counts.Terminating != 0 {
		t.Errorf("terminating %d after the finalizer was removed", r.Counts.Terminating)
	}
}

// An event whose time Git writes with an offset ("+00:00") is stored by the
// server in UTC form ("Z"): a canonicalisation the local diff does not know.
// Once the server has shown that applying it changes nothing, the object is
// converged (and counted as server-equivalent), not rewritten every tick;
// a restarted process finds the same with its dry run, without writing.
func TestServerEquivalentObjectIsWrittenOnce(t *testing.T) {
	event := `apiVersion: v1
kind: Event
metadata:
  name: deployed
involvedObject:
  apiVersion: v1
  kind: ConfigMap
  name: web-config
  namespace: NAMESPACE
reason: Deployed
message: deployed from Git
type: Normal
firstTimestamp: "2026-01-02T03:04:05+00:00"
lastTimestamp: "2026-01-02T03:04:05+00:00"
count: 1
`
	h := newHarness(t)
	event = strings.Replace(event, "NAMESPACE", h.ns, 1)
	h.repo.Commit("app", map[string]string{"configmap.yaml": configMapYAML, "event.yaml": event})
	h.mustTick(reconcile.OutcomeApplied)
	ev, err := cp.Client.CoreV1().Events(h.ns).Get(context.Background(), "deployed", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ev.FirstTimestamp.UTC().Format("2006-01-02T15:04:05Z"); got != "2026-01-02T03:04:05Z" {
		t.Fatalf("stored firstTimestamp %s", got)
	}
	check := func(r *reconcile.Result) {
		t.Helper()
		if r.Counts.Equivalent != 1 || len(r.Equivalent) != 1 || r.Equivalent[0] != "Event/deployed" {
			t.Errorf("server-equivalent %d %v, want 1 [Event/deployed]", r.Counts.Equivalent, r.Equivalent)
		}
	}
	for range 3 {
		check(h.mustTick(reconcile.OutcomeConverged))
	}
	h.rec = nil // restart: nothing remembered
	check(h.mustTick(reconcile.OutcomeConverged))
	check(h.mustTick(reconcile.OutcomeConverged))
	after, err := cp.Client.CoreV1().Events(h.ns).Get(context.Background(), "deployed", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != ev.ResourceVersion {
		t.Errorf("the event was rewritten (resourceVersion %s -> %s)", ev.ResourceVersion, after.ResourceVersion)
	}
	// Real drift is still healed.
	after.Message = "edited"
	if _, err := cp.Client.CoreV1().Events(h.ns).Update(context.Background(), after, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.mustTick(reconcile.OutcomeApplied)
	got, _ := cp.Client.CoreV1().Events(h.ns).Get(context.Background(), "deployed", metav1.GetOptions{})
	if got.Message != "deployed from Git" {
		t.Errorf("drift not healed: message %q", got.Message)
	}
}
