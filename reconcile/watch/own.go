package watch

import (
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// ownDeleteTTL is how long an object recond deleted is remembered when its
// delete event does not come (a finalizer holds it): long enough for any
// finalizer a namespace's controllers run, short enough that the set
// cannot grow without bound.
const ownDeleteTTL = time.Hour

// ownDeleteSweep is the size above which remembering one more delete first
// forgets those older than ownDeleteTTL.
const ownDeleteSweep = 1024

// ownDeletes are the objects (by UID) that recond is deleting or has
// deleted: their delete event, and the updates that mark them terminating
// or remove their finalizers, are recond's own, not drift. A UID names one
// object for its whole life, never a later one of the same name.
type ownDeletes struct {
	mu sync.Mutex
	m  map[types.UID]time.Time
	// events counts the events not handed to OnEvent because they were
	// recond's own: its applies (classifyUpdate) and its deletes.
	events atomic.Int64
}

func (o *ownDeletes) add(uid types.UID, now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = map[types.UID]time.Time{}
	}
	if len(o.m) >= ownDeleteSweep {
		for u, at := range o.m {
			if now.Sub(at) > ownDeleteTTL {
				delete(o.m, u)
			}
		}
	}
	o.m[uid] = now
}

func (o *ownDeletes) remove(uid types.UID) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.m, uid)
}

// has reports whether uid is an object recond deleted; take does too, and
// forgets it (its delete event has come: nothing more will).
func (o *ownDeletes) has(uid types.UID) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.m[uid]
	return ok
}

func (o *ownDeletes) take(uid types.UID) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.m[uid]
	delete(o.m, uid)
	return ok
}

// Deleting tells the cache that recond is about to delete the object with
// uid (a prune): its delete event, and the updates of it while it
// terminates, are recond's own and are not handed to OnEvent. Call it
// before the request, whose event may come back before its answer, and
// NotDeleting when the request failed. Safe for concurrent use.
func (c *Cache) Deleting(uid types.UID) {
	if uid != "" {
		c.own.add(uid, time.Now())
	}
}

// NotDeleting takes back Deleting: the delete request for uid failed, so
// a later delete of the object is someone else's.
func (c *Cache) NotDeleting(uid types.UID) { c.own.remove(uid) }

// ownDelete reports whether p, a delete or an update, is of an object
// recond deleted: the delete itself (forgotten then), or an update of the
// object while it terminates.
func (c *Cache) ownDelete(p pending) bool {
	uid := p.new.GetUID()
	if p.old == nil {
		return c.own.take(uid)
	}
	return terminating(p.new) && c.own.has(uid)
}

func terminating(u *unstructured.Unstructured) bool {
	return u.GetDeletionTimestamp() != nil
}
