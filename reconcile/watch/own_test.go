package watch

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func (e *env) uid(name string) types.UID {
	e.t.Helper()
	u, err := e.dyn.Resource(gvrConfigMap).Namespace(e.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return u.GetUID()
}

// The deletes recond makes (Deleting before the request) are its own: the
// delete event, and the updates of an object a finalizer holds while it
// terminates, are not handed to OnEvent, so that a prune asks for no tick
// and counts as no heal. A delete whose request failed (NotDeleting) is
// forgotten: a later delete of the object by someone else is an event, as
// is any other object's. Events are dispatched in order, so the last one,
// another manager's edit, comes after every event of the deletes.
func TestOwnDeletesAreNotEvents(t *testing.T) {
	var ev events
	e := newEnv(t, Options{OnEvent: ev.add})
	for _, name := range []string{"pruned", "held", "refused", "edited"} {
		e.applyConfigMap("recond", name, true, map[string]any{"k": "1"})
	}
	e.patch(gvrConfigMap, "held", "recond", `{"metadata":{"finalizers":["test.recond.dev/hold"]}}`)
	e.waitListEqual(gvkConfigMap, gvrConfigMap)

	// Two prunes: one gone at once, one held by a finalizer, which its
	// controller removes later.
	e.cache.Deleting(e.uid("pruned"))
	e.delete(gvrConfigMap, "pruned")
	e.cache.Deleting(e.uid("held"))
	e.delete(gvrConfigMap, "held")
	e.patch(gvrConfigMap, "held", "finalizer-controller", `{"metadata":{"finalizers":null}}`)
	// A delete request that failed: the object's later deletion is
	// someone else's.
	uid := e.uid("refused")
	e.cache.Deleting(uid)
	e.cache.NotDeleting(uid)
	e.delete(gvrConfigMap, "refused")
	e.patch(gvrConfigMap, "edited", "kubectl", `{"data":{"k":"2"}}`)

	got := waitEvent(t, &ev, "for the edit", func(e Event) bool { return e.Name == "edited" })
	want := []Event{{Kind: "ConfigMap", Name: "refused", Type: EventDelete}, {Kind: "ConfigMap", Name: "edited", Type: EventUpdate, Manager: "kubectl"}}
	if d := cmp.Diff(want, got, ignoreAt); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}
	// The two deletes, and the held one's update as it began terminating.
	if own := e.cache.Stats().Own; own < 3 {
		t.Errorf("Stats.Own = %d, want at least 3", own)
	}
	e.cache.own.mu.Lock()
	left := len(e.cache.own.m)
	e.cache.own.mu.Unlock()
	if left != 0 {
		t.Errorf("%d deletes still remembered after their events came, want none", left)
	}
}
