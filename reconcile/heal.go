package reconcile

import (
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"recond.dev/recond/reconcile/heal"
	"recond.dev/recond/reconcile/inventory"
)

// Heal is one drift that a watch event showed and a write restored
// (reconcile/heal).
type Heal = heal.Heal

// Changed tells the reconciler that a watch saw another manager change (or
// delete) the object kind/name at time at. The write that restores it
// reports the heal latency from at. The caller asks for a tick
// (TriggerAfter); Changed only remembers.
func (r *Reconciler) Changed(kind, name string, at time.Time) {
	r.mem.changed(kind+"/"+name, at)
}

// HealDebounce is the window of the watches' requests for a tick
// (TriggerBurst): a change after a quiet window asks for a tick at once,
// the changes within a window ask for one more at its end, so that a
// burst (a rollout touching an object several times, kubectl apply of
// many objects) costs two ticks at most. It is also how long recond waits
// for its own inventory write to return before it judges a change of the
// inventory.
const HealDebounce = 100 * time.Millisecond

// Noticed is what a watch on owned objects calls for a change (or delete)
// by someone else: remember it (heal latency) and ask for a tick, at once
// unless a burst is under way (TriggerBurst). A tick that starts on a
// burst's first event may see the burst's other objects as they were
// before it: prunes carry the observed resourceVersion as a precondition
// (cluster.Client.Prune), so that such an object is judged again, not
// deleted. A write to the status subresource (a controller reporting)
// is not drift, but it may change the object's health: it asks for a tick
// too, so that health is as fresh as drift, without counting as a change.
func (r *Reconciler) Noticed(kind, name, subresource string, at time.Time) {
	if kind == "ConfigMap" && name == inventory.Name(r.cfg.Name) {
		// recond writes its inventory twice a revision, often within one
		// second, so that the watch cannot always tell the second write from
		// another writer's (managedFields keep whole seconds). Once recond's
		// own write has returned (HealDebounce later), a live inventory that
		// is the version recond wrote is not a change.
		time.AfterFunc(HealDebounce, func() {
			if !(inventoryStore{r}).ownWrite() {
				r.Trigger(TriggerWatch)
			}
		})
		return
	}
	if subresource != "status" {
		r.Changed(kind, name, at)
	}
	r.TriggerBurst(TriggerWatch, HealDebounce)
}

// OwnDeletes is implemented by a Live that hands watch events to Noticed
// (the watch cache): told before recond deletes an object, it keeps the
// object's delete event (and its updates while it terminates) from
// Noticed, so that recond's own prune neither asks for a tick nor counts
// as drift healed when a later revision creates the object again.
type OwnDeletes interface {
	// Deleting is called before the delete request of the object with
	// uid, whose event may come back before its answer; NotDeleting when
	// the request failed.
	Deleting(uid types.UID)
	NotDeleting(uid types.UID)
}

// deleting tells the watch cache, if there is one, that recond is about
// to delete live; the returned function takes the request's error, and
// takes the notice back when it failed. The write gate calls it for every
// delete recond makes (a prune, a recreate's, a hook's), so that its event
// is not taken for another manager's.
func (r *Reconciler) deleting(live *unstructured.Unstructured) func(error) {
	od, ok := r.live.(OwnDeletes)
	uid := live.GetUID()
	if !ok || uid == "" {
		return func(error) {}
	}
	od.Deleting(uid)
	return func(err error) {
		if err != nil {
			od.NotDeleting(uid)
		}
	}
}
