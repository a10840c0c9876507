package reconcile

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"recond.dev/recond/reconcile/cluster"
	"recond.dev/recond/reconcile/diff"
	"recond.dev/recond/reconcile/inventory"
	"recond.dev/recond/reconcile/optout"
	"recond.dev/recond/reconcile/verdict"
	"recond.dev/recond/reconcile/wave"
)

// apply writes what the diff found. The write gate's list first says
// whether the tick writes objects at all (gate.go: a dry run validates
// and stops, a suspension and self-heal off report the differences); then
// every object it will write is validated with a server-side dry run, so
// an object the server rejects fails the phase before anything is written.
// Writes go wave by wave in dependency order (reconcile/wave), the objects
// of one wave concurrently (Config.ApplyConcurrency); prunes run only after
// every write succeeded, waves in reverse order.
func (t *tick) apply(ctx context.Context) (err error) {
	st := t.st
	writes, deletes := wave.Order(st.Changes)
	owned := t.owned()
	st.owned = owned
	defer t.applied(ctx, owned, &err)
	inv, err := inventoryStore{t.r}.load(ctx, st)
	if err != nil {
		return err
	}
	if !t.r.cfg.DryRun {
		// A lost inventory is rewritten whatever the rest of the tick does.
		if err := (inventoryStore{t.r}).repair(ctx, inv); err != nil {
			return err
		}
	}
	h, err := t.hold(ctx, inv)
	if err != nil || h != nil && !h.validate {
		return t.held(ctx, h, err)
	}
	if writes, err = t.validate(ctx, writes); err != nil || h != nil {
		return err
	}
	// A revision's pre-hooks run (and succeed) before anything of it is
	// written; while one runs, the tick writes nothing more.
	if ok, err := (hookRunner{t.r, st}).before(ctx); !ok || err != nil {
		return err
	}
	if err := t.recordKinds(ctx, writes, inv, owned); err != nil {
		return err
	}
	if err := t.inWaves(ctx, writes, t.write, func(c diff.Change, o outcome) { t.wrote(c, o, owned) }); err != nil {
		return err
	}
	if err := t.inWaves(ctx, deletes, t.prune, func(c diff.Change, o outcome) { t.pruned(c, o, owned) }); err != nil {
		return err
	}
	if err := t.orphan(ctx, owned); err != nil {
		return err
	}
	next := t.nextInventory(owned)
	if err := (inventoryStore{t.r}).save(ctx, next); err != nil {
		return err
	}
	st.inv = next
	st.RevisionApplied = inv.Revision != st.Revision
	// Post-hooks run once the revision was applied in full and a tick
	// found it healthy.
	return hookRunner{t.r, st}.after(ctx)
}

// owned are the live objects this instance owns, as the apply goes (none
// on a quiet tick, which writes nothing): an incremental tick's are the
// last tick's, corrected for the objects it read again (deltaFor); a full
// tick's are found walking every live object.
func (t *tick) owned() *ownership {
	st := t.st
	if st.quiet != nil {
		return ownershipOf(nil, t.r.cfg.Name)
	}
	if d := st.delta; d != nil && d.base.owned != nil {
		return d.base.owned
	}
	return ownershipOf(st.Live, t.r.cfg.Name)
}

// applied ends the apply phase: what the tick meant to write and never
// attempted (it stopped at a refusal, a failure or a stop), for a partial
// apply's report; a suspension made while the tick wrote, which stopped it
// where it was (what it did not write is reported as differences, not as a
// failure); and the objects recond owns after the tick.
func (t *tick) applied(ctx context.Context, owned *ownership, errp *error) {
	st, err := t.st, *errp
	if err != nil && !t.r.cfg.DryRun {
		st.Counts.NotWritten = max(len(st.Changes)-len(st.Ops), 0)
	}
	var se *SuspendedError
	if errors.As(err, &se) {
		st.suspension.Active = se.Suspension
		st.Counts.NotWritten = max(len(st.Changes)-len(st.Ops), 0)
		t.r.log.InfoContext(ctx, "suspended while writing: the tick stopped writing", "written", len(st.Ops),
			"not_written", st.Counts.NotWritten, "by", se.Suspension.By, "reason", se.Suspension.Reason)
		*errp = nil
	}
	if q := st.quiet; q != nil {
		st.Counts.Managed = q.managed
	} else {
		st.Counts.Managed = owned.size()
	}
}

// hold is why the tick writes no object (nil: it writes): the answer of
// the write gate's list (gate.go), or a quiet tick, which has nothing to
// write and whose inventory is what the last full tick saved.
func (t *tick) hold(ctx context.Context, inv *inventory.Inventory) (*hold, error) {
	h, err := holds(ctx, t, inv)
	if err == nil && h == nil && t.st.quiet != nil {
		h = &hold{rule: "quiet", postHooks: true}
	}
	return h, err
}

// held ends an apply that a hold (or err) keeps from writing: the
// revision's post-hooks still run when the hold lets them.
func (t *tick) held(ctx context.Context, h *hold, err error) error {
	if err != nil || !h.postHooks {
		return err
	}
	return hookRunner{t.r, t.st}.after(ctx)
}

// recordKinds records the kinds about to be written before writing them,
// with the revision still the last one applied in full: if this tick
// stops half way, the next one still lists (and can prune) what it wrote.
func (t *tick) recordKinds(ctx context.Context, writes []diff.Change, inv *inventory.Inventory, owned *ownership) error {
	if len(writes) == 0 {
		return nil
	}
	pre := t.nextInventory(owned)
	pre.Revision = inv.Revision
	for _, k := range inv.Kinds {
		pre.Add(k)
	}
	return inventoryStore{t.r}.save(ctx, pre)
}

// inWaves makes changes (sorted by dependency) wave by wave
// (reconcile/wave), each wave's calls at once (inWave); before each wave
// the suspension is read again. record merges each call that ran into the
// State, in the changes' order.
func (t *tick) inWaves(ctx context.Context, changes []diff.Change, fn func(context.Context, diff.Change) outcome, record func(diff.Change, outcome)) error {
	for _, w := range wave.Split(changes) {
		if err := t.recheckSuspension(ctx); err != nil {
			return err
		}
		results, err := t.inWave(ctx, w, fn)
		for i, o := range results {
			if o.ran {
				record(w[i], o)
			}
		}
		if err != nil {
			return writeFailed(t.st, err)
		}
	}
	return nil
}

// write applies one create or update (or recreates the object).
func (t *tick) write(ctx context.Context, c diff.Change) outcome {
	octx, span := startSpan(ctx, "recond.apply.object", kindAttr(c.Kind), attribute.String("k8s.name", c.Name), attribute.String("recond.action", string(c.Action)))
	var out *unstructured.Unstructured
	var err error
	if t.st.recreating(c.Desired) {
		out, err = recreator{t.r}.recreate(octx, c)
	} else {
		out, err = t.r.kube.ApplyFor(octx, cluster.Write{Purpose: cluster.PurposeApply, Object: c.Desired}, c.Live)
	}
	endSpan(span, err)
	return outcome{out: out, err: err}
}

// wrote records a write's outcome.
func (t *tick) wrote(c diff.Change, o outcome, owned *ownership) {
	st := t.st
	op := Operation{Kind: c.Kind, Name: c.Name, Action: c.Action, Err: o.err, Duration: o.took,
		APIVersion: c.Desired.GetAPIVersion(), Fields: fieldPaths(c), Recreated: st.recreating(c.Desired)}
	switch {
	case o.out != nil:
		op.UID, op.ResourceVersion = o.out.GetUID(), o.out.GetResourceVersion()
	case c.Live != nil:
		op.UID, op.ResourceVersion = c.Live.GetUID(), c.Live.GetResourceVersion()
	}
	st.Ops = append(st.Ops, op)
	if o.err != nil {
		st.Counts.Refused++
		return
	}
	st.wrote = true
	st.applied(c.Desired, o.out)
	// What the server made of the desired object is, by definition, what
	// applying it gives.
	t.r.mem.created(c.Desired, o.out)
	owned.own(objectKey(c.Desired), c.Live)
	if c.Action == diff.Create {
		st.Counts.Created++
	} else {
		st.Counts.Updated++
	}
}

// prune deletes one owned object that left Git.
func (t *tick) prune(ctx context.Context, c diff.Change) outcome {
	octx, span := startSpan(ctx, "recond.apply.object", kindAttr(c.Kind), attribute.String("k8s.name", c.Name), attribute.String("recond.action", string(diff.Delete)))
	err := t.r.kube.Prune(octx, c.Live)
	if apierrors.IsConflict(err) {
		// Changed since observed: its watch event is on the way, and the
		// next tick judges it again.
		span.SetAttributes(attribute.Bool("recond.prune.deferred", true))
		endSpan(span, nil)
		return outcome{changed: true}
	}
	endSpan(span, err)
	return outcome{err: err}
}

// pruned records a prune's outcome.
func (t *tick) pruned(c diff.Change, o outcome, owned *ownership) {
	st := t.st
	if o.changed {
		st.Deferred = append(st.Deferred, refOf(c.Live))
		st.Counts.Deferred++
		return
	}
	st.Ops = append(st.Ops, Operation{Kind: c.Kind, Name: c.Name, Action: diff.Delete, Err: o.err, Duration: o.took,
		APIVersion: c.Live.GetAPIVersion(), UID: c.Live.GetUID(), ResourceVersion: c.Live.GetResourceVersion()})
	if o.err != nil {
		st.Counts.Refused++
		return
	}
	st.wrote = true
	t.r.mem.forget(c.Live)
	// The kind stays in the inventory for one more tick: an object a
	// finalizer holds is still there, terminating, and must be seen.
	st.pruned = append(st.pruned, c.Live.GroupVersionKind())
	owned.disown(objectKey(c.Live))
	st.Counts.Pruned++
}

// outcome is what one call made for a change returned.
type outcome struct {
	out  *unstructured.Unstructured
	err  error
	took time.Duration
	ran  bool // false: never called (an earlier call failed, or a stop)
	// changed: a prune the server refused because the object changed
	// since it was observed (resourceVersion precondition).
	changed bool
}

// inWave calls fn for every change, at most Config.ApplyConcurrency at once
// (1 when unset), in order. It starts no further call after one has failed
// (unless the server refused that object alone, see refused: then every
// refused object of the wave is found and named) or once the tick is
// stopped, and returns when the calls in flight have
// finished: a write is never abandoned half way by recond itself, only cut
// by the tick's deadline. results[i] is changes[i]'s. The error is the first
// failure in the changes' order, else the stop. The callers merge the
// results into the State in that order, so Ops and counts come out the same
// whatever the concurrency.
func (t *tick) inWave(ctx context.Context, changes []diff.Change, fn func(context.Context, diff.Change) outcome) ([]outcome, error) {
	n := max(t.r.cfg.ApplyConcurrency, 1)
	results := make([]outcome, len(changes))
	slots := make(chan struct{}, n)
	var (
		wg      sync.WaitGroup
		failed  atomic.Bool
		stopErr error
	)
	for i, c := range changes {
		slots <- struct{}{} // wait for a call to end
		if failed.Load() {
			break
		}
		// Before every call, not once per wave: the gate's rules of the
		// process's state (gate.go) and the tick's stop, whose answers may
		// change while the wave runs.
		if err := beforeCall(t); err != nil {
			stopErr = err
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			start := time.Now()
			o := call(ctx, c, fn)
			o.took, o.ran = time.Since(start), true
			if o.err != nil && !refused(o.err) {
				failed.Store(true)
			}
			results[i] = o
		}()
	}
	wg.Wait()
	for _, o := range results {
		if o.ran && o.err != nil {
			return results, o.err
		}
	}
	return results, stopErr
}

// call runs fn, turning a panic into an error: the phase's own recovery
// does not reach another goroutine.
func call(ctx context.Context, c diff.Change, fn func(context.Context, diff.Change) outcome) (o outcome) {
	defer func() {
		if v := recover(); v != nil {
			o = outcome{err: fmt.Errorf("%s/%s: %w: %v\n%s", c.Kind, c.Name, errPanic, v, debug.Stack())}
		}
	}()
	return fn(ctx, c)
}

// orphan removes recond's labels and provenance annotations from the owned
// objects that left Git with recond.dev/prune: disabled: they are no
// longer recond's, and never pruned.
func (t *tick) orphan(ctx context.Context, owned *ownership) error {
	r, st := t.r, t.st
	for _, l := range st.Orphans {
		if err := st.stopped(); err != nil {
			return err
		}
		if err := r.mayWrite(); err != nil {
			return err
		}
		octx, span := startSpan(ctx, "recond.apply.object", kindAttr(l.GetKind()), attribute.String("k8s.name", l.GetName()), attribute.String("recond.action", "orphan"))
		_, err := r.kube.MergePatch(octx, cluster.Write{Purpose: cluster.PurposeOrphan, GVK: l.GroupVersionKind(), Name: l.GetName(), Live: l}, optout.OrphanPatch, cluster.FieldManager)
		endSpan(span, err)
		if err != nil {
			return fmt.Errorf("orphan %s/%s (recond.dev/prune: disabled): %w", l.GetKind(), l.GetName(), err)
		}
		st.wrote = true
		r.mem.forget(l)
		owned.disown(objectKey(l))
		st.Orphaned = append(st.Orphaned, refOf(l))
		st.Counts.Orphaned++
		r.log.InfoContext(ctx, "orphaned: left Git with "+AnnotationPrune+": disabled; recond's labels removed, not deleted",
			"kind", l.GetKind(), "name", l.GetName())
	}
	return nil
}

// writeFailed is the apply's error when a wave of writes (or prunes) ended
// with err: every object of the wave whose write failed, named, with what
// the tick wrote before and left unwritten. A stop with no failed write is
// err itself.
func writeFailed(st *State, err error) error {
	var errs []error
	for _, op := range st.Ops {
		if op.Err != nil {
			errs = append(errs, op.Err)
		}
	}
	if len(errs) == 0 {
		return err
	}
	written := st.Counts.Created + st.Counts.Updated + st.Counts.Pruned
	return rejected(fmt.Sprintf("apply stopped: %d object(s) written, %d refused, %d not attempted", written, len(errs), max(len(st.Changes)-len(st.Ops), 0)), errs)
}

// fieldPaths are the paths of the fields an update changes.
func fieldPaths(c diff.Change) []string {
	if len(c.Fields) == 0 {
		return nil
	}
	out := make([]string, len(c.Fields))
	for i, f := range c.Fields {
		out[i] = f.Path
	}
	return out
}

// validate dry-runs every object about to be written, so that one the
// server rejects fails the phase before anything is written. It returns the
// writes that would change something: an update whose dry-run result equals
// the live object is a difference only the local comparison sees (a
// normalisation gap), remembered as equivalent and not written.
func (t *tick) validate(ctx context.Context, writes []diff.Change) ([]diff.Change, error) {
	if len(writes) == 0 {
		return writes, nil
	}
	vctx, span := startSpan(ctx, "recond.validate", attribute.Int("recond.objects.count", len(writes)))
	kept, err := t.dryRun(vctx, writes)
	endSpan(span, err)
	return kept, err
}

// dryRun is validate's work, in its span.
func (t *tick) dryRun(ctx context.Context, writes []diff.Change) ([]diff.Change, error) {
	r, st := t.r, t.st
	opts := r.diffOptions()
	opts.Sensitive = st.sensitive
	// A create the server accepted in an earlier tick's dry run, unchanged
	// in Git since, is not validated again: a first sync of thousands of
	// objects that a tick timeout cut short goes on where it stopped.
	r.mem.expireAccepted()
	var check []diff.Change
	local := map[*unstructured.Unstructured]error{}
	for _, c := range writes {
		// A Secret's data the API server cannot decode is refused here,
		// naming the key (the server answers 500, quoting nothing useful).
		if err := secretData(c.Desired); err != nil {
			local[c.Desired] = err
			continue
		}
		if c.Action != diff.Create || !r.mem.accepted(c.Desired) {
			check = append(check, c)
		}
	}
	// The dry runs are independent of each other: all of them, every wave,
	// run in one bounded pool before the first write.
	results, err := t.inWave(ctx, check, func(ctx context.Context, c diff.Change) outcome {
		out, err := r.kube.Apply(ctx, c.Desired, true)
		if c.Action != diff.Update {
			// Only an update's result is compared (below); a first sync
			// would otherwise hold one per object until every dry run ran.
			out = nil
		}
		return outcome{out: out, err: err}
	})
	for i, c := range check {
		if results[i].ran && results[i].err == nil && c.Action == diff.Create {
			r.mem.accept(c.Desired)
		}
	}
	var suspended *SuspendedError
	if errors.Is(err, errStopped) || errors.As(err, &suspended) {
		return nil, err
	}
	// A refusal of an immutable field is reason immutable, or, with
	// recond.dev/force: recreate, a recreate rather than an update.
	refusals := 0
	for i, c := range check {
		if !results[i].ran || results[i].err == nil {
			continue
		}
		ierr, recreate := recreator{r}.refusal(ctx, c, results[i].err)
		if recreate {
			results[i].err = nil
			st.recreate(c.Desired)
			continue
		}
		results[i].err = ierr
		refusals++
	}
	if refusals == 0 && err != nil && refused(err) {
		// Every refusal was a recreate; unless the pool stopped before a
		// dry run (a stop, a lost Lease), which stays the error.
		err = nil
		for i := range check {
			if !results[i].ran {
				stop := r.mayWrite()
				if stop == nil {
					stop = st.stopped()
				}
				if stop == nil {
					stop = errors.New("stopped before every object was checked")
				}
				return nil, fmt.Errorf("validate before writing (nothing written): %w", stop)
			}
		}
	}
	if err != nil || len(local) > 0 {
		dry := make(map[*unstructured.Unstructured]outcome, len(check))
		for i, c := range check {
			dry[c.Desired] = results[i]
		}
		// Every object refused, in write order: the server's verdicts and
		// the local ones.
		var errs []error
		for _, c := range writes {
			o := dry[c.Desired]
			if e, ok := local[c.Desired]; ok {
				o = outcome{err: e, ran: true}
			}
			if !o.ran || o.err == nil {
				continue
			}
			op := Operation{Kind: c.Kind, Name: c.Name, Action: c.Action, Err: o.err, Duration: o.took, APIVersion: c.Desired.GetAPIVersion()}
			if c.Live != nil {
				op.UID, op.ResourceVersion = c.Live.GetUID(), c.Live.GetResourceVersion()
			}
			st.Rejected = append(st.Rejected, op)
			errs = append(errs, o.err)
		}
		return nil, rejected("validate before writing (nothing written)", errs)
	}
	out := make(map[*unstructured.Unstructured]*unstructured.Unstructured, len(check))
	for i, c := range check {
		out[c.Desired] = results[i].out
	}
	kept := writes[:0:0]
	for _, c := range writes {
		if c.Action == diff.Update && !st.recreating(c.Desired) && len(diff.Equivalent(out[c.Desired], c.Live, opts)) == 0 {
			r.mem.remember(c.Desired, c.Live, verdict.Server)
			st.dropChange(c)
			st.Equivalent = append(st.Equivalent, c.Kind+"/"+c.Name)
			st.Counts.Equivalent++
			continue
		}
		kept = append(kept, c)
	}
	return kept, nil
}
