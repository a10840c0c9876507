package leader

import (
	"context"
	"errors"
	"fmt"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ErrNotWriter is wrapped by every error of MayWrite: this process may not
// write for its instance now.
var ErrNotWriter = errors.New("not the instance's writer")

// MayWrite returns nil when this process may write for its instance now:
// it leads, the Lease as last observed (by the election's own requests
// and by the watch) is held by it in the term it acquired, its last
// renewal is younger than the renew deadline, and the wait after taking
// over a Lease it did not see expire is over. Otherwise an error wrapping
// ErrNotWriter says why. It is cheap (no request) and safe for concurrent
// use: the apply phase calls it before every write.
func (e *Elector) MayWrite() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := time.Now()
	switch {
	case e.lost != nil:
		return fmt.Errorf("%w: %w", ErrNotWriter, e.lost)
	case !e.leading:
		return fmt.Errorf("%w: this process does not lead (lease %s)", ErrNotWriter, e.describe())
	case now.Before(e.notBefore):
		return fmt.Errorf("%w: lease %s was taken over without seeing it expire; no write before %s", ErrNotWriter, e.describe(), e.notBefore.Format(time.RFC3339Nano))
	case e.cfg.Mode != ModeClaim && now.Sub(e.renewed) > e.cfg.RenewDeadline:
		return fmt.Errorf("%w: lease %s last renewed %s ago, longer than the renew deadline %s: another process may hold it by now",
			ErrNotWriter, e.describe(), now.Sub(e.renewed).Round(time.Millisecond), e.cfg.RenewDeadline)
	case e.cfg.Mode == ModeClaim && now.Sub(e.renewed) > e.claimDeadline():
		return fmt.Errorf("%w: lease %s last renewed %s ago, longer than two thirds of its claim (%s): another process may take it over at its end",
			ErrNotWriter, e.describe(), now.Sub(e.renewed).Round(time.Millisecond), e.claimDuration())
	}
	return nil
}

// Err returns the last failure of a request the election needs on the
// Lease (get, create, update), or nil when the last of each succeeded.
func (e *Elector) Err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, op := range []string{opGet, opCreate, opUpdate} {
		if err := e.failures[op]; err != nil {
			return err
		}
	}
	return nil
}

// describe is "namespace/name". The caller may hold e.mu.
func (e *Elector) describe() string { return e.cfg.Namespace + "/" + e.cfg.Lease }

// observation is the Lease as last seen: whether it exists, who holds it,
// which incarnation (UID) it is and when its holder's term ends by its own
// record.
type observation struct {
	exists  bool
	holder  string
	uid     types.UID
	expires time.Time
	renewed time.Time
}

func observationOf(lease *coordv1.Lease) observation {
	if lease == nil {
		return observation{}
	}
	o := observation{exists: true, uid: lease.UID}
	if h := lease.Spec.HolderIdentity; h != nil {
		o.holder = *h
	}
	if r, d := lease.Spec.RenewTime, lease.Spec.LeaseDurationSeconds; r != nil && d != nil {
		o.renewed = r.Time
		o.expires = r.Add(time.Duration(*d) * time.Second)
	}
	return o
}

// observe records a fresh reading of the Lease (nil: it does not exist):
// one the election made, or one made to check what the watch showed. While
// this process holds the Lease, a reading that shows it missing, held by
// another process or created again ends its leadership at once.
func (e *Elector) observe(lease *coordv1.Lease) {
	o := observationOf(lease)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.saw(o)
	e.last = o
	if !e.held {
		return
	}
	switch {
	case !o.exists:
		e.lose("the Lease was deleted")
	case o.holder != e.cfg.Identity:
		e.lose(fmt.Sprintf("the Lease is held by %s", describeHolder(o.holder)))
	case o.uid != e.term:
		e.lose("the Lease was deleted and created again")
	}
}

// sawExist records that the Lease exists (a create refused because it
// does), in an incarnation not known.
func (e *Elector) sawExist() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.saw(observation{exists: true, uid: unknownIncarnation})
}

// unknownIncarnation stands for a Lease seen to exist without its UID.
const unknownIncarnation types.UID = "?"

// saw records the incarnation (UID) of a Lease seen to exist. The caller
// holds e.mu.
func (e *Elector) saw(o observation) {
	if o.exists && len(e.seen) < 64 {
		e.seen[o.uid] = struct{}{}
	}
}

// seenOther reports whether this process has seen the Lease exist in
// another incarnation than uid. The caller holds e.mu.
func (e *Elector) seenOther(uid types.UID, unknown bool) bool {
	for u := range e.seen {
		if u != uid && (unknown || u != unknownIncarnation) {
			return true
		}
	}
	return false
}

// wrote records a successful create or update of the Lease by this
// process, started at start. A Lease created after this process had seen
// it exist was taken without seeing it expire (it was deleted under its
// holder): no write before a lease duration has passed, by which time the
// old holder has given up (its writes stop once its renewals have failed
// for the renew deadline, shorter than the lease duration, and its watch
// stops them at once).
func (e *Elector) wrote(lease *coordv1.Lease, start time.Time, created bool) {
	o := observationOf(lease)
	e.mu.Lock()
	defer e.mu.Unlock()
	// The watch may show the Lease this process has just created before
	// this call: only another incarnation counts.
	// A Lease created by this process: any other incarnation seen before,
	// even one known only to exist, was deleted under its holder. One
	// taken over by an update: only a known other incarnation (the Lease
	// recreated by someone else, with no holder) was.
	seenBefore := e.seenOther(o.uid, created)
	e.saw(o)
	e.last = o
	if o.holder != e.cfg.Identity {
		return // a release
	}
	if e.held && o.uid != e.term {
		e.lose("the Lease was deleted and created again")
		return
	}
	e.term, e.renewed = o.uid, start
	// The old holder may still believe it leads.
	if seenBefore && !e.held {
		e.notBefore = start.Add(e.cfg.LeaseDuration)
	}
}

// lose ends this process's leadership because another process took the
// Lease, or it is gone: MayWrite refuses from now on, and lead's context
// is cancelled with the reason. The caller holds e.mu.
func (e *Elector) lose(why string) {
	if e.cfg.Mode == ModeClaim {
		why += claimAdvice
	}
	e.end(why)
}

// end is lose without the advice a claim's loss to another process gets.
// The caller holds e.mu.
func (e *Elector) end(why string) {
	if e.lost != nil || !e.held {
		return
	}
	e.lost = fmt.Errorf("%w %s: %s", ErrLost, e.describe(), why)
	e.log.Error("leadership lost: no more writes", "lease", e.cfg.Lease, "identity", e.cfg.Identity, "reason", why)
	if e.cancelLead != nil {
		e.cancelLead(e.lost)
	}
}

// alarming reports whether a Lease the watch showed (nil: deleted) would
// end this process's leadership if it were current.
func (e *Elector) alarming(lease *coordv1.Lease) bool {
	o := observationOf(lease)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.saw(o)
	return e.held && e.lost == nil && (!o.exists || o.holder != e.cfg.Identity || o.uid != e.term)
}

// verify reads the Lease afresh after the watch showed something alarming:
// an event may be older than this process's own last write of the Lease,
// a fresh read is not.
func (e *Elector) verify(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.RenewDeadline)
	defer cancel()
	l := &lock{e: e}
	_, _, _ = l.Get(ctx)
}

func describeHolder(h string) string {
	if h == "" {
		return "nobody (released)"
	}
	return h
}
