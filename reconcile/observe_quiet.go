package reconcile

import (
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// LiveGeneration is implemented by a Live that can tell when what it
// returns has changed (the watch cache): Generation moves with every change
// of any object it holds; ok is false when it cannot vouch for its stores
// (not synced, stale, or a watch whose last request failed: the API server
// unreachable), and the tick must List.
type LiveGeneration interface {
	Generation() (gen uint64, ok bool)
}

// quietMemo is what a full tick that found nothing to do leaves for the
// next: while the revision's render is the same, nothing the watches see
// has changed (the generation of the watch cache, the inventory included)
// and no time-bound state is pending, the next tick is quiet. A quiet
// tick reuses the live objects, the diff's verdicts, what apply would
// count and the health assessment instead of going through every object:
// its cost does not grow with the number of objects. A tick asked for by
// hand (recond sync, POST /api/v1/sync, recond trigger) is never quiet.
type quietMemo struct {
	revision string
	// desired is the render the tick worked with (the cached slice: the
	// same slice while the revision does not move).
	desired []*unstructured.Unstructured
	// gen is the watch cache's generation when the tick's observe began.
	gen        uint64
	live       []*unstructured.Unstructured
	skipped    []Skip
	equivalent []string
	managed    int
	health     *Health
	// healthUntil is when the health assessment may change without any
	// object changing: the first progress deadline of an object in
	// progress (zero: none).
	healthUntil time.Time
}

// quietFor returns the memo the tick may reuse, or nil: it is at the
// memo's revision and render, the watch cache has seen no change since
// (gen, ok: its generation when observe began), and the tick was not asked
// for by hand.
func (t *tick) quietFor(gen uint64, ok bool) *quietMemo {
	st := t.st
	if !ok || st.trigger == TriggerManual {
		return nil
	}
	q := t.r.mem.lastQuiet()
	if q == nil || q.gen != gen || q.revision != st.Revision || !sameSlice(q.desired, st.Desired) {
		return nil
	}
	return q
}

// liveGeneration is the watch cache's generation, ok false when there is
// no watch cache or it cannot vouch for its stores.
func liveGeneration(live Live) (uint64, bool) {
	g, isGen := live.(LiveGeneration)
	if !isGen {
		return 0, false
	}
	return g.Generation()
}

// sameSlice reports whether a and b are the same slice (not equal
// contents: the same backing array and length).
func sameSlice(a, b []*unstructured.Unstructured) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// keepQuiet records, at the end of a tick, what the next one may reuse:
// a full tick that succeeded, wrote nothing, found no change and left
// nothing pending (hooks, a fight's back-off, objects terminating,
// orphans, a suspension, kinds not served) leaves a memo; any other tick
// drops it. A quiet tick keeps the memo it used.
func (t *tick) keepQuiet(res *Result) {
	st := t.st
	if st.quiet != nil && res.Failure() == nil && !st.wrote && len(st.Changes) == 0 {
		return
	}
	if !st.genOK || res.Failure() != nil || st.wrote || len(st.Changes) > 0 || len(st.Ops) > 0 ||
		len(st.Terminating) > 0 || len(st.BackingOff) > 0 || len(st.HooksWaiting) > 0 || len(st.Orphans) > 0 ||
		len(st.unserved) > 0 || len(st.Rejected) > 0 || len(st.misspelt) > 0 || st.suspension.Active != nil ||
		st.Health == nil || st.trigger == TriggerManual || !hooksDone(st) {
		t.r.mem.setQuiet(nil)
		return
	}
	t.r.mem.setQuiet(&quietMemo{revision: st.Revision, desired: st.Desired, gen: st.gen, live: st.Live,
		skipped: st.Skipped, equivalent: st.Equivalent, managed: st.Counts.Managed,
		health: st.Health, healthUntil: st.healthUntil})
}

// hooksDone reports whether the revision's hooks, if any, have all run.
func hooksDone(st *State) bool {
	if len(st.Hooks) == 0 {
		return true
	}
	return st.inv != nil && st.inv.Hooks != nil && st.inv.Hooks.Revision == st.Revision && st.inv.Hooks.Phase == "done"
}
