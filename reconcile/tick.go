package reconcile

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync/atomic"
	"time"

	"recond.dev/recond/reconcile/diff"
	"recond.dev/recond/reconcile/heal"
	"recond.dev/recond/reconcile/inventory"
	"recond.dev/recond/reconcile/loop"
)

// tick is one tick of the engine: the Reconciler, whose memory outlives
// it, and the State its phases hand each other (gitops-engine's
// syncContext, beside its cluster cache). Every phase is a method of a
// tick; each phase runs on a tick of its own, so that a phase its tick
// abandoned keeps the State it had.
type tick struct {
	r  *Reconciler
	st *State
}

type phaseFunc func(t *tick, ctx context.Context) error

// phase is one row of the tick: which phase, its function, whether `recond
// diff` (Plan) runs it, whether it finishes the object it is writing when
// the loop is stopped instead of being cancelled at once, and the earlier
// phase it needs: a row with needs runs when that phase succeeded, even if
// a later one failed; a row without runs only when every earlier phase
// succeeded.
type phase struct {
	p        Phase
	fn       phaseFunc
	plan     bool
	finishes bool
	needs    Phase
	// aside: its failure is counted, logged and spanned like any, but is not
	// the tick's (PhaseResult.Aside).
	aside bool
}

// phases is the tick, in order.
var phases = []phase{
	{p: PhaseRead, fn: (*tick).read, plan: true},
	{p: PhaseObserve, fn: (*tick).observe, plan: true},
	{p: PhaseDiff, fn: (*tick).diff, plan: true},
	{p: PhaseApply, fn: (*tick).apply, finishes: true},
	// Health is assessed whenever there are live objects to assess: a
	// failed diff or apply does not make the running workloads' health
	// unknowable.
	// Its failure (a panic) does not fail the tick either: health is a
	// second dimension, the outcome stays about Git and the API server.
	{p: PhaseHealth, fn: (*tick).assessHealth, needs: PhaseObserve, aside: true},
}

// Tick runs one full tick: read, observe, diff, apply, health (a manual one).
func (r *Reconciler) Tick(ctx context.Context) *Result {
	return r.runTick(ctx, TriggerManual, false)
}

// TickFor is Tick for a tick that t asked for.
func (r *Reconciler) TickFor(ctx context.Context, t Trigger) *Result {
	return r.runTick(ctx, t, false)
}

// Plan runs read, observe and diff, and writes nothing (`recond diff`).
func (r *Reconciler) Plan(ctx context.Context) *Result {
	return r.runTick(ctx, TriggerManual, true)
}

func (r *Reconciler) runTick(ctx context.Context, why Trigger, planOnly bool) *Result {
	id, links := r.ticks.Begin()
	defer r.ticks.End(id)
	ctx = loop.WithLinks(ctx, links)
	res := &Result{ID: id, Start: time.Now(), DryRun: r.cfg.DryRun, Trigger: why}
	for _, o := range r.observers {
		ctx = o.TickStart(ctx)
	}
	st := &State{cfg: r.cfg, ctx: ctx, stop: ctx.Done(), recreates: &keySet{}, trigger: why, tick: id}
	t := &tick{r: r, st: st}
	lc, costs := r.live.(LiveCost)
	var before ObserveCost
	if costs {
		before = lc.Cost()
	}
	if !planOnly && !r.cfg.DryRun {
		inventoryStore{r}.keep(ctx, st)
	}

	succeeded := map[Phase]bool{}
	failed := false
	for _, ph := range phases {
		if planOnly && !ph.plan {
			continue
		}
		if ph.needs != "" && !succeeded[ph.needs] || ph.needs == "" && failed {
			continue
		}
		pctx := ctx
		if ph.finishes {
			// The phase finishes the object it is writing when the loop is
			// stopped (it checks st.stop between objects); only the tick
			// deadline cuts a call short.
			pctx = context.WithoutCancel(ctx)
			if d, ok := ctx.Deadline(); ok {
				var cancel context.CancelFunc
				pctx, cancel = context.WithDeadlineCause(pctx, d, errTickTimeout)
				defer cancel()
			}
		}
		// What the phases before this one left, for the tick's result if
		// this one is abandoned: its goroutine keeps st.
		before := *t.st
		ok, abandoned := t.runPhase(pctx, ph, res)
		// An abandoned phase fails the tick even aside: the loop stalled.
		succeeded[ph.p], failed = ok, failed || !ok && (!ph.aside || abandoned)
		if abandoned {
			// No later phase runs beside the one still running.
			t.st = &before
			break
		}
	}
	st = t.st
	if !planOnly {
		res.Heals = r.mem.healed(res.Start, healWrites(st.Ops), time.Now())
		for _, h := range res.Heals {
			if h.Fight {
				// Come back when the back-off ends, whatever the interval.
				time.AfterFunc(h.Backoff, func() { r.Trigger(TriggerWatch) })
			}
		}
	}
	if costs {
		after := lc.Cost()
		res.Observe = &ObserveCost{Calls: after.Calls - before.Calls, SyncWait: after.SyncWait - before.SyncWait, CacheAge: after.CacheAge,
			Restarts: r.mem.restartsSince(after.Restarts)}
	}
	res.BackingOff = st.BackingOff
	res.Revision, res.Fetched, res.Superseded, res.HooksWaiting, res.Chart = st.Revision, st.Fetched, st.Superseded, st.HooksWaiting, st.Chart
	if (planOnly || r.cfg.DryRun) && len(st.Hooks) > 0 {
		res.Hooks = hookRunner{r, st}.plan(ctx, st.Hooks)
	}
	res.Changes, res.Ops, res.Counts = st.Changes, st.Ops, st.Counts
	res.Terminating, res.Equivalent = st.Terminating, st.Equivalent
	res.Rejected, res.RevisionApplied, res.Health = st.Rejected, st.RevisionApplied, st.Health
	res.Skipped, res.Orphaned, res.Deferred = st.Skipped, st.Orphaned, st.Deferred
	if len(st.Deferred) > 0 && !planOnly {
		// Judged again at once: the change that refused the prune may not
		// come through a watch (--observe=list).
		r.TriggerAfter(TriggerWatch, HealDebounce)
	}
	if !st.suspensionRead {
		// Not read this tick (it failed before the inventory was read):
		// the last one known, while it lasts.
		st.suspension.Active = r.mem.lastKnown()
	}
	if s := st.suspension.Active; s.Active(time.Now()) {
		res.Suspension = s
		r.WakeAt(s.Until)
	}
	if res.Suspension == nil {
		// Told by the first tick that no longer finds it suspended.
		res.ResumedBy = r.mem.takeResumedBy()
	}
	res.Inventory = ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Name: inventory.Name(r.cfg.Name)}
	if inv := r.mem.inventory(); inv != nil {
		res.Inventory.UID, res.Inventory.ResourceVersion = inv.UID, inv.ResourceVersion
	}
	res.Quiet = st.quiet != nil
	if !planOnly {
		t.keepQuiet(res)
		t.keepDelta(res)
	}
	res.Duration = time.Since(res.Start)
	switch {
	case res.Failure() != nil:
		res.Outcome = OutcomeFailed
	case st.wrote:
		res.Outcome = OutcomeApplied
	case len(st.Changes) > 0:
		res.Outcome = OutcomeOutOfSync
	default:
		res.Outcome = OutcomeConverged
	}
	for i := len(r.observers) - 1; i >= 0; i-- {
		r.observers[i].TickEnd(ctx, res)
	}
	return res
}

// runPhase is the one wrapper every phase runs in: it tells the observers,
// times the phase, recovers a panic, abandons a phase that outlives the
// tick's deadline, and classifies the error once. It reports whether the
// phase succeeded and whether it was abandoned (it is still running).
func (t *tick) runPhase(ctx context.Context, ph phase, res *Result) (bool, bool) {
	r, p := t.r, ph.p
	for _, o := range r.observers {
		ctx = o.PhaseStart(ctx, p)
	}
	start := time.Now()
	err, abandoned := t.runBounded(ctx, ph)
	// A phase that stopped work of its own that outlived the deadline (a
	// render worker killed) counts as abandoned too, though it returned.
	pr := PhaseResult{Phase: p, Duration: time.Since(start), Aside: ph.aside && !abandoned,
		Abandoned: abandoned || errors.Is(err, errAbandoned),
		Panicked:  errors.Is(err, errPhasePanic)}
	if err != nil {
		if cause := context.Cause(ctx); cause == errTickTimeout {
			err = fmt.Errorf("%w: %w", cause, err)
		}
		pr.Err = &PhaseError{Phase: p, Reason: Classify(err), Err: err}
	}
	res.Phases = append(res.Phases, pr)
	for i := len(r.observers) - 1; i >= 0; i-- {
		r.observers[i].PhaseEnd(ctx, pr, res)
	}
	return err == nil, abandoned
}

// AbandonAfter is how long a phase may go on after its context is done (the
// tick's deadline; for the phases but apply, also the loop's stop) before
// the tick abandons it: the tick fails in that phase with reason timeout,
// recond_loop_stalls_total counts it, and the next tick can start. A phase
// that honours its context returns well within it.
const AbandonAfter = 2 * time.Second

// maxStrays is how many abandoned phases may still be running before the
// loop starts no more ticks (loop.MaxStrays).
const maxStrays = loop.MaxStrays

// runBounded runs the phase in a goroutine of its own and waits for it, or,
// once ctx is done, for abandonAfter more. An abandoned phase keeps its
// goroutine (Go cannot stop it) and counts as a stray until it returns.
func (t *tick) runBounded(ctx context.Context, ph phase) (error, bool) {
	r, own := t.r, &tick{r: t.r, st: t.st}
	const (
		running int32 = iota
		returned
		abandoned
	)
	var state atomic.Int32
	done := make(chan error, 1)
	go func() {
		err := safeRun(ctx, ph.fn, own)
		if !state.CompareAndSwap(running, returned) {
			// Abandoned: nobody waits for err.
			r.ticks.StrayReturned()
			r.log.Warn("an abandoned phase returned", "phase", string(ph.p), "error", err)
			return
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err, false
	case <-ctx.Done():
	}
	timer := time.NewTimer(r.abandonAfter)
	defer timer.Stop()
	select {
	case err := <-done:
		return err, false
	case <-timer.C:
	}
	// Counted before the phase can see it abandoned, so that Strays is
	// never below 0.
	r.ticks.Strayed()
	if !state.CompareAndSwap(running, abandoned) {
		r.ticks.Unstrayed()
		return <-done, false
	}
	return fmt.Errorf("%w: the %s phase did not return within %s of its context's end", errAbandoned, ph.p, r.abandonAfter), true
}

func safeRun(ctx context.Context, fn phaseFunc, t *tick) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%w: %v\n%s", errPhasePanic, v, debug.Stack())
		}
	}()
	return fn(t, ctx)
}

// healWrites are the writes of ops that may have healed drift: the
// creates and updates that succeeded.
func healWrites(ops []Operation) []heal.Write {
	var out []heal.Write
	for _, op := range ops {
		if op.Err == nil && op.Action != diff.Delete {
			out = append(out, heal.Write{Kind: op.Kind, Name: op.Name})
		}
	}
	return out
}
