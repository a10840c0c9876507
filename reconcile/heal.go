package reconcile

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"recond.dev/recond/reconcile/diff"
)

// Self-heal timing. A write that undoes another manager's change less than
// fightWindow after the previous one for the same object is a fight: the
// object is then left alone for a back-off that doubles with every further
// fight, up to maxBackoff, and resets after a quiet maxBackoff.
const (
	fightWindow    = 10 * time.Second
	initialBackoff = 2 * time.Second
	maxBackoff     = 5 * time.Minute
)

// healer remembers, per object, when a watch event showed that someone else
// changed it (so that the write restoring it can report the heal latency)
// and how it fares in a fight. Safe for concurrent use: events arrive from
// the watch while a tick runs.
type healer struct {
	mu      sync.Mutex
	seen    map[string]time.Time // object key -> first unhealed change seen
	objects map[string]*healState
	now     func() time.Time
}

type healState struct {
	lastHeal time.Time
	backoff  time.Duration
	until    time.Time // no self-heal write before this
}

func newHealer() *healer {
	return &healer{seen: map[string]time.Time{}, objects: map[string]*healState{}, now: time.Now}
}

// Changed tells the reconciler that a watch saw another manager change (or
// delete) the object kind/name at time at. The write that restores it
// reports the heal latency from at. The caller asks for a tick
// (TriggerAfter); Changed only remembers.
func (r *Reconciler) Changed(kind, name string, at time.Time) {
	r.heal.mu.Lock()
	defer r.heal.mu.Unlock()
	key := kind + "/" + name
	if _, ok := r.heal.seen[key]; !ok {
		r.heal.seen[key] = at
	}
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
	if kind == "ConfigMap" && name == inventoryName(r.cfg.Name) {
		// recond writes its inventory twice a revision, often within one
		// second, so that the watch cannot always tell the second write from
		// another writer's (managedFields keep whole seconds). Once recond's
		// own write has returned (HealDebounce later), a live inventory that
		// is the version recond wrote is not a change.
		time.AfterFunc(HealDebounce, func() {
			if !r.inventoryIsOwnWrite() {
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

// backingOff reports whether self-heal writes to key are held back, and
// until when.
func (h *healer) backingOff(key string) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.objects[key]
	if s == nil || !h.now().Before(s.until) {
		return time.Time{}, false
	}
	return s.until, true
}

// Heal is one drift that a watch event showed and a write restored.
type Heal struct {
	Kind, Name string
	// Latency is from the event that showed the change to the end of the
	// write that restored it.
	Latency time.Duration
	// Fight is set when the object was restored less than fightWindow
	// after the previous heal: another manager keeps changing it, and
	// recond now backs off (Backoff).
	Fight   bool
	Backoff time.Duration
}

// healed settles the tick: every successful write of an object a watch
// showed changed is a heal (latency since the change); every other
// remembered change older than the tick was not drift (a status update, an
// edit of a field Git does not set) and is forgotten.
func (h *healer) healed(tickStart time.Time, ops []Operation, writesEnd time.Time) []Heal {
	h.mu.Lock()
	defer h.mu.Unlock()
	var heals []Heal
	for _, op := range ops {
		key := op.Kind + "/" + op.Name
		if op.Err != nil || op.Action == diff.Delete {
			continue
		}
		at, ok := h.seen[key]
		if !ok {
			continue
		}
		delete(h.seen, key)
		heal := Heal{Kind: op.Kind, Name: op.Name, Latency: writesEnd.Sub(at)}
		s := h.objects[key]
		if s == nil {
			s = &healState{}
			h.objects[key] = s
		}
		now := h.now()
		// Time is measured from the last heal or, when later, from the end
		// of the back-off: a revert right after a back-off is still the
		// same fight, and the time spent backing off is not quiet.
		ref := s.lastHeal
		if s.until.After(ref) {
			ref = s.until
		}
		switch {
		case !s.lastHeal.IsZero() && now.Sub(ref) < fightWindow:
			if s.backoff == 0 {
				s.backoff = initialBackoff
			} else {
				s.backoff = min(2*s.backoff, maxBackoff)
			}
			s.until = now.Add(s.backoff)
			heal.Fight, heal.Backoff = true, s.backoff
		case now.Sub(ref) > maxBackoff:
			s.backoff = 0 // a quiet while: forgive
		}
		s.lastHeal = now
		heals = append(heals, heal)
	}
	for key, at := range h.seen {
		// A change to an object backing off is kept: the write when the
		// back-off ends is its heal.
		if s := h.objects[key]; at.Before(tickStart) && (s == nil || !h.now().Before(s.until)) {
			delete(h.seen, key)
		}
	}
	return heals
}
