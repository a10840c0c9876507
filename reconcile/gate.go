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
	"recond.dev/recond/reconcile/inventory"
	"recond.dev/recond/reconcile/writerule"
)

// writeGate is the one way to the API server's write verbs: the Client asks
// Admit before every write recond makes (apply, prune, orphaning, a
// recreate, a hook's create and delete, the inventory, the suspension's
// annotations). It reads one list of rules, gateRules, in order: the
// process's own (a dry run writes nothing; the Lease, fenced; the
// suspension as it is now, not as the tick read it; self-heal off), the
// per-object rules of reconcile/writerule (ownership, opt-outs, reserved
// names), and the claims a recreate would take with it (transitive
// ownership, asked of the API server). It counts the writes in flight, so
// that a suspension can wait for them.
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

// gateRule is one entry of the write gate's list. A rule may answer three
// questions, each asked of every rule that answers it, in the list's
// order, the first refusal being the answer:
//   - write: may the Client make w now (Admit)?
//   - call: may the next call of a wave start (a write or a validating dry
//     run; inWave asks before each)? The answers that change while a wave
//     runs: the Lease, the tick's stop, a suspension.
//   - tick: does the tick write objects at all? Asked once, before its
//     first write; a hold keeps every object of the tick unwritten.
//
// A new per-object rule is a function in a leaf (in reconcile/writerule's
// list, or a leaf of its own: perObject) and one line here.
type gateRule struct {
	name  string
	write func(g *writeGate, ctx context.Context, w cluster.Write) error
	call  func(t *tick) error
	tick  func(ctx context.Context, t *tick, inv *inventory.Inventory) (*hold, error)
}

// hold is why a tick writes no object: which rule, whether the writes are
// still validated by a dry run (and the tick then stops), and whether the
// revision's post-hooks still run when due.
type hold struct {
	rule      string
	validate  bool
	postHooks bool
}

// gateRules is the write gate's list.
var gateRules = []gateRule{
	// A dry run writes nothing, and validates what it would write.
	{name: "dry-run", write: refuseDryRun, tick: holdDryRun},
	// The Lease fences the loop's writes; an operator's suspension is
	// written by whichever process of the instance is asked (a standby
	// too). Checked before every call, first: a lost Lease also stops the
	// loop, and is the reason.
	{name: "lease", write: leaseHeld, call: func(t *tick) error { return t.r.mayWrite() }},
	// The loop's stop, or the tick's deadline: no call starts after it.
	{name: "stop", call: func(t *tick) error { return t.st.stopped() }},
	// A suspension: asked of this process, or read; the tick reads it
	// again from the API server before writing.
	{name: "suspension", write: refuseSuspended, call: (*tick).suspendedNow, tick: holdSuspended},
	// Self-heal off: while Git has not moved, the drift is reported only
	// (the revision's post-hooks still run once it is healthy).
	{name: "self-heal", tick: holdDrift},
	// The per-object rules (reconcile/writerule).
	{name: "objects", write: perObject(writerule.Check)},
	// A recreate's delete must not take claims with it.
	{name: "claims", write: refuseClaims},
}

// perObject is a gate rule of a per-object rule: one that judges a write
// alone, knowing the instance (writerule.Check, or a leaf's own).
func perObject(check func(writerule.Policy, cluster.Write) error) func(*writeGate, context.Context, cluster.Write) error {
	return func(g *writeGate, _ context.Context, w cluster.Write) error { return check(g.r.policy(), w) }
}

// holds asks the list whether the tick writes objects at all: the first
// hold, or nil.
func holds(ctx context.Context, t *tick, inv *inventory.Inventory) (*hold, error) {
	for _, rule := range gateRules {
		if rule.tick == nil {
			continue
		}
		if h, err := rule.tick(ctx, t, inv); err != nil || h != nil {
			return h, err
		}
	}
	return nil, nil
}

// beforeCall asks the list whether the next call of a wave may start.
func beforeCall(t *tick) error {
	for _, rule := range gateRules {
		if rule.call == nil {
			continue
		}
		if err := rule.call(t); err != nil {
			return err
		}
	}
	return nil
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

// Admit implements cluster.Gate: every write rule of the list, then the
// write is counted in flight.
func (g *writeGate) Admit(ctx context.Context, w cluster.Write) (func(error), error) {
	for _, rule := range gateRules {
		if rule.write == nil {
			continue
		}
		if err := rule.write(g, ctx, w); err != nil {
			return nil, err
		}
	}
	// recond's own delete (a prune, a recreate's, a hook's) is told to the
	// watch caches before it is sent: its event asks for no tick and is no
	// drift to heal.
	deleted := func(error) {}
	if w.Verb == cluster.VerbDelete && w.Live != nil {
		deleted = g.r.deleting(w.Live)
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

func refuseDryRun(g *writeGate, _ context.Context, _ cluster.Write) error {
	if g.r.cfg.DryRun {
		return errDryRunWrite
	}
	return nil
}

func holdDryRun(_ context.Context, t *tick, _ *inventory.Inventory) (*hold, error) {
	if t.r.cfg.DryRun {
		return &hold{rule: "dry-run", validate: true}, nil
	}
	return nil, nil
}

func leaseHeld(g *writeGate, _ context.Context, w cluster.Write) error {
	if w.Purpose == cluster.PurposeSuspension {
		return nil
	}
	return g.r.mayWrite()
}

func refuseSuspended(g *writeGate, _ context.Context, w cluster.Write) error {
	if !objectWrite(w) {
		return nil
	}
	if s := g.suspended(time.Now()); s != nil {
		return &SuspendedError{Suspension: s}
	}
	return nil
}

// holdSuspended reads the suspension again before a tick that would
// write, and settles its annotations: a suspension stops the very next
// write, and a resume lets the very next tick heal. Suspended, the tick
// reports its differences, and writes, prunes and heals nothing; no hook
// runs.
func holdSuspended(ctx context.Context, t *tick, _ *inventory.Inventory) (*hold, error) {
	r, st := t.r, t.st
	// Before anything is written (objects, orphans, hooks, the
	// suspension's own annotations), from the API server: the reading at
	// the tick's start may be older than a render, or than the watch
	// cache's news; a suspension made, or lifted, a moment ago counts. A
	// tick with nothing to write asks nothing.
	if !st.suspensionRead || len(st.Changes) > 0 || len(st.Orphans) > 0 || len(st.Hooks) > 0 || st.suspension.Stale {
		if err := (suspensionStore{r}).fresh(ctx, st); err != nil {
			return nil, err
		}
	}
	if err := (suspensionStore{r}).settle(ctx, st); err != nil {
		return nil, err
	}
	s := st.suspension.Active
	if s == nil {
		return nil, nil
	}
	if len(st.Changes) > 0 {
		r.log.InfoContext(ctx, "suspended: differences left as they are", "differences", len(st.Changes),
			"by", s.By, "reason", s.Reason, "until", s.Until.UTC().Format(time.RFC3339))
	}
	return &hold{rule: "suspension"}, nil
}

func holdDrift(_ context.Context, t *tick, inv *inventory.Inventory) (*hold, error) {
	if !t.r.cfg.SelfHeal && t.st.Revision == inv.Revision {
		return &hold{rule: "self-heal", postHooks: true}, nil
	}
	return nil, nil
}

func refuseClaims(g *writeGate, ctx context.Context, w cluster.Write) error {
	if w.Purpose == cluster.PurposeRecreate && w.Verb == cluster.VerbDelete {
		if why := takesClaims(ctx, g.r.kube, w.Live); why != "" {
			return &writerule.Refusal{Write: w, Rule: "claims", Reason: writerule.ReasonInvalid, Why: why}
		}
	}
	return nil
}

// mayWrite asks Config.MayWrite whether this process may write now.
func (r *Reconciler) mayWrite() error {
	if r.cfg.MayWrite == nil || r.cfg.DryRun {
		return nil
	}
	if err := r.cfg.MayWrite(); err != nil {
		return fmt.Errorf("%w (nothing more written, nothing pruned): %w", errNotWriter, err)
	}
	return nil
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
	if s := g.r.mem.lastKnown(); s.Active(now) {
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
func takesClaims(ctx context.Context, kube *cluster.Client, live *unstructured.Unstructured) string {
	if live == nil {
		return "the object to delete is not known"
	}
	var held []*unstructured.Unstructured
	for _, gvk := range []schema.GroupVersionKind{pvcGVK, statefulSetGVK} {
		items, err := kube.List(ctx, gvk, "")
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
		o, err := kube.Get(ctx, gv.WithKind(ref.Kind), ref.Name)
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
func (t *tick) suspendedNow() error {
	r := t.r
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
func (t *tick) recheckSuspension(ctx context.Context) error {
	cm, err := inventoryStore{t.r}.live(ctx)
	if err != nil {
		return err
	}
	if cm != nil {
		suspensionStore{t.r}.note(t.st, cm)
	}
	return t.suspendedNow()
}
