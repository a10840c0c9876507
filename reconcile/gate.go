package reconcile

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"recond.dev/recond/reconcile/cluster"
	"recond.dev/recond/reconcile/writerule"
)

// writeGate is the one way to the API server's write verbs: the Client asks
// Admit before every write recond makes (apply, prune, orphaning, a
// recreate, a hook's create and delete, the inventory, the suspension's
// annotations). It reads one list of rules, in order: the process's own
// (a dry run writes nothing; the Lease, fenced; the suspension as it is
// now, not as the tick read it), the per-object rules of reconcile/guard
// (ownership, opt-outs, reserved names), and the claims a recreate would
// take with it (transitive ownership, asked of the API server). It counts
// the writes in flight, so that a suspension can wait for them.
type writeGate struct {
	r *Reconciler

	mu       sync.Mutex
	idle     *sync.Cond
	inflight int
	// finished counts the writes of the namespace's objects that returned
	// (not the inventory's, nor the suspension's).
	finished int64
	// hold is a suspension asked of this process (Suspend) that its
	// readings may not show yet: every object write is refused from the
	// request on, until a tick that started after it read the suspension.
	hold *Suspension
	// holdTick is the tick that was running (or last ran) at the request.
	holdTick uint64
}

func newWriteGate(r *Reconciler) *writeGate {
	g := &writeGate{r: r}
	g.idle = sync.NewCond(&g.mu)
	return g
}

// errDryRunWrite is a write asked of a dry run.
var errDryRunWrite = errors.New("refused to write: --dry-run")

// SuspendedError is a write refused because the instance is suspended: the
// tick stops writing there and reports the suspension, not a failure.
type SuspendedError struct{ Suspension *Suspension }

func (e *SuspendedError) Error() string {
	return "refused to write: " + e.Suspension.String()
}

// objectWrite reports whether w writes an object of the namespace (not
// recond's own record: the inventory, the suspension).
func objectWrite(w cluster.Write) bool {
	switch w.Purpose {
	case cluster.PurposeInventory, cluster.PurposeSuspension, cluster.PurposeSeed:
		return false
	}
	return true
}

// Admit implements cluster.Gate.
func (g *writeGate) Admit(ctx context.Context, w cluster.Write) (func(error), error) {
	r := g.r
	if r.cfg.DryRun {
		return nil, errDryRunWrite
	}
	// The Lease fences the loop's writes; an operator's suspension is
	// written by whichever process of the instance is asked (a standby
	// too).
	if w.Purpose != cluster.PurposeSuspension {
		if err := r.mayWrite(); err != nil {
			return nil, err
		}
	}
	if objectWrite(w) {
		if s := g.suspended(time.Now()); s != nil {
			return nil, &SuspendedError{Suspension: s}
		}
	}
	if err := writerule.Check(r.policy(), w); err != nil {
		return nil, err
	}
	if w.Purpose == cluster.PurposeRecreate && w.Verb == cluster.VerbDelete {
		if why := r.takesClaims(ctx, w.Live); why != "" {
			return nil, &writerule.Refusal{Write: w, Rule: "claims", Reason: writerule.ReasonInvalid, Why: why}
		}
	}
	// recond's own delete (a prune, a recreate's, a hook's) is told to the
	// watch caches before it is sent: its event asks for no tick and is no
	// drift to heal.
	deleted := func(error) {}
	if w.Verb == cluster.VerbDelete && w.Live != nil {
		deleted = r.deleting(w.Live)
	}
	g.mu.Lock()
	g.inflight++
	g.mu.Unlock()
	var once sync.Once
	return func(err error) {
		deleted(err)
		once.Do(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.inflight--
			if objectWrite(w) {
				g.finished++
			}
			g.idle.Broadcast()
		})
	}, nil
}

// suspended is the suspension in force now: one asked of this process
// (hold) or the last one read from the inventory.
func (g *writeGate) suspended(now time.Time) *Suspension {
	g.mu.Lock()
	hold := g.hold
	g.mu.Unlock()
	if hold.Active(now) {
		return hold
	}
	if s := g.r.suspend.lastKnown(); s.Active(now) {
		return s
	}
	return nil
}

// holdWrites refuses every object write from now on (s: the suspension
// asked), and returns how many object writes had returned so far.
func (g *writeGate) holdWrites(s *Suspension, tick uint64) int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.hold, g.holdTick = s, tick
	return g.finished
}

// release lets writes through again (a resume, or a suspension that could
// not be written).
func (g *writeGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.hold = nil
}

// settled drops the hold once a tick that started after it read the
// suspension (tick: that tick's number): from then on the reading decides.
func (g *writeGate) settled(tick uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.hold != nil && tick > g.holdTick {
		g.hold = nil
	}
}

// drain waits until no write is in flight (or ctx ends), and returns how
// many object writes returned since finished0.
func (g *writeGate) drain(ctx context.Context, finished0 int64) (int64, error) {
	stop := context.AfterFunc(ctx, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.idle.Broadcast()
	})
	defer stop()
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.inflight > 0 && ctx.Err() == nil {
		g.idle.Wait()
	}
	return g.finished - finished0, ctx.Err()
}

// policy is what the per-object rules know of the instance.
func (r *Reconciler) policy() writerule.Policy {
	return writerule.Policy{Instance: r.cfg.Name, KeysSecret: r.cfg.KeysSecret}
}

// takesClaims says why deleting live in the foreground would take
// PersistentVolumeClaims with it ("": it would not): a claim, or a
// StatefulSet that deletes its claims, that live owns, directly or
// through any chain of owners (a custom resource owning a ConfigMap that
// owns a claim).
func (r *Reconciler) takesClaims(ctx context.Context, live *unstructured.Unstructured) string {
	if live == nil {
		return "the object to delete is not known"
	}
	var held []*unstructured.Unstructured
	for _, gvk := range []schema.GroupVersionKind{pvcGVK, statefulSetGVK} {
		items, err := r.kube.List(ctx, gvk, "")
		if err != nil {
			return "recond cannot tell whether it owns PersistentVolumeClaims (" + err.Error() + ")"
		}
		for i := range items {
			if gvk == pvcGVK || writerule.DeletesClaims(&items[i]) {
				held = append(held, &items[i])
			}
		}
	}
	chain := writerule.Chain(string(live.GetUID()), held, func(_ *unstructured.Unstructured, ref writerule.OwnerRef) *unstructured.Unstructured {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil {
			return nil
		}
		o, err := r.kube.Get(ctx, gv.WithKind(ref.Kind), ref.Name)
		if err != nil || o == nil || string(o.GetUID()) != ref.UID {
			return nil
		}
		return o
	})
	if chain == "" {
		return ""
	}
	return fmt.Sprintf("deleting it would take %s with it", chain)
}

var statefulSetGVK = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "StatefulSet"}

// suspendedNow is a *SuspendedError while the instance is suspended (asked
// of this process, or last read), nil otherwise: inWave asks before every
// call, so that a wave stops at the first write after a suspension.
func (r *Reconciler) suspendedNow() error {
	if r.cfg.DryRun || r.gate == nil {
		// A dry run writes nothing; a Reconciler not made by New has no
		// gate, and its Client writes nothing either (cluster.ErrNoGate).
		return nil
	}
	if s := r.gate.suspended(time.Now()); s != nil {
		return &SuspendedError{Suspension: s}
	}
	return nil
}

// recheckSuspension reads the suspension again before a wave of writes or
// prunes: from the watch cache when observing by watch (no request), else
// from the API server; a suspension written by hand (kubectl annotate)
// since the tick started stops the next wave.
func (r *Reconciler) recheckSuspension(ctx context.Context, st *State) error {
	cm, err := r.liveInventory(ctx)
	if err != nil {
		return err
	}
	if cm != nil {
		suspensionStore{r}.note(st, cm)
	}
	return r.suspendedNow()
}
