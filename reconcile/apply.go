package reconcile

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"recond.dev/recond/reconcile/cluster"
	"recond.dev/recond/reconcile/diff"
	"recond.dev/recond/reconcile/optout"
)

// applyOrder ranks kinds so that what others depend on is written first:
// identities and permissions, then configuration and storage, then the
// services and workloads that use them, then the rest. Prunes run in reverse.
var applyOrder = map[string]int{
	"ServiceAccount": 0, "Role": 1, "RoleBinding": 2,
	"ConfigMap": 3, "Secret": 3, "PersistentVolumeClaim": 4, "Service": 5,
	"Deployment": 6, "StatefulSet": 6, "DaemonSet": 6, "ReplicaSet": 6, "Job": 6, "CronJob": 6, "Pod": 6,
}

func rank(kind string) int {
	if r, ok := applyOrder[kind]; ok {
		return r
	}
	return 7
}

func byDependency(a, b diff.Change) int {
	if d := rank(a.Kind) - rank(b.Kind); d != 0 {
		return d
	}
	if a.Kind != b.Kind {
		if a.Kind < b.Kind {
			return -1
		}
		return 1
	}
	if a.Name < b.Name {
		return -1
	} else if a.Name > b.Name {
		return 1
	}
	return 0
}

// waves splits changes sorted by dependency into runs of the same rank:
// the objects of a wave do not depend on each other and are written
// concurrently; a wave starts when the one before it has been written.
func waves(cs []diff.Change) [][]diff.Change {
	var out [][]diff.Change
	for i := 0; i < len(cs); {
		j := i + 1
		for j < len(cs) && rank(cs[j].Kind) == rank(cs[i].Kind) {
			j++
		}
		out = append(out, cs[i:j:j])
		i = j
	}
	return out
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
func (r *Reconciler) inWave(ctx context.Context, st *State, changes []diff.Change, fn func(context.Context, diff.Change) outcome) ([]outcome, error) {
	n := max(r.cfg.ApplyConcurrency, 1)
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
		// Before every call, not once per wave: a process that stopped
		// holding the Lease mid-wave writes nothing more (checked first: a
		// lost Lease also stops the loop, and is the reason).
		if err := r.mayWrite(); err != nil {
			stopErr = err
			break
		}
		if err := st.stopped(); err != nil {
			stopErr = err
			break
		}
		if err := r.suspendedNow(); err != nil {
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

// errNotWriter marks a write refused because this process may not write
// for its instance now (Config.MayWrite): another process holds the Lease,
// or it is gone. Classify reports it as ReasonConflict.
var errNotWriter = errors.New("refused to write: this process does not hold the instance's Lease")

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

// holdForSuspension reads the suspension again before a tick that would
// write, and settles its annotations: a suspension stops the very next
// write, and a resume lets the very next tick heal.
func (r *Reconciler) holdForSuspension(ctx context.Context, st *State) error {
	// Before anything is written (objects, orphans, hooks, the
	// suspension's own annotations), from the API server: the reading at
	// the tick's start may be older than a render, or than the watch
	// cache's news; a suspension made, or lifted, a moment ago counts. A
	// tick with nothing to write asks nothing.
	if !st.suspensionRead || len(st.Changes) > 0 || len(st.Orphans) > 0 || len(st.Hooks) > 0 || st.suspension.Stale {
		if err := (suspensionStore{r}).fresh(ctx, st); err != nil {
			return err
		}
	}
	if err := (suspensionStore{r}).settle(ctx, st); err != nil {
		return err
	}
	if s := st.suspension.Active; s != nil && len(st.Changes) > 0 {
		r.log.InfoContext(ctx, "suspended: differences left as they are", "differences", len(st.Changes),
			"by", s.By, "reason", s.Reason, "until", s.Until.UTC().Format(time.RFC3339))
	}
	return nil
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

// apply writes what the diff found. Every object it will write is first
// validated with a server-side dry run, so an object the server rejects fails
// the phase before anything is written. Writes go wave by wave in dependency
// order, the objects of one wave concurrently (Config.ApplyConcurrency);
// prunes run only after every write succeeded, waves in reverse order.
func (r *Reconciler) apply(ctx context.Context, st *State) (err error) {
	var writes, deletes []diff.Change
	for _, c := range st.Changes {
		if c.Action == diff.Delete {
			deletes = append(deletes, c)
		} else {
			writes = append(writes, c)
		}
	}
	slices.SortStableFunc(writes, byDependency)
	slices.SortStableFunc(deletes, func(a, b diff.Change) int { return byDependency(b, a) })

	owned := map[string]bool{}
	if q := st.quiet; q != nil {
		defer func() { st.Counts.Managed = q.managed }()
	} else {
		for _, l := range st.Live {
			if ownedBy(l.GetLabels(), r.cfg.Name) {
				owned[objectKey(l)] = true
			}
		}
		defer func() { st.Counts.Managed = len(owned) }()
	}
	// A suspension made while the tick writes stops it where it is: what
	// it did not write is reported as differences, not as a failure.
	defer func() {
		var se *SuspendedError
		if errors.As(err, &se) {
			st.suspension.Active = se.Suspension
			st.Counts.NotWritten = max(len(st.Changes)-len(st.Ops), 0)
			r.log.InfoContext(ctx, "suspended while writing: the tick stopped writing", "written", len(st.Ops),
				"not_written", st.Counts.NotWritten, "by", se.Suspension.By, "reason", se.Suspension.Reason)
			err = nil
		}
	}()
	// What the tick meant to write and never attempted (the apply stopped
	// at a refusal, a failure or a stop), for a partial apply's report.
	defer func() {
		if err != nil && !r.cfg.DryRun {
			st.Counts.NotWritten = max(len(st.Changes)-len(st.Ops), 0)
		}
	}()

	inv, err := r.loadInventory(ctx, st)
	if err != nil {
		return err
	}
	if !r.cfg.DryRun {
		// A lost inventory is rewritten whatever the rest of the tick does.
		if err := r.repairInventory(ctx, inv); err != nil {
			return err
		}
	}

	if !r.cfg.DryRun {
		if err := r.holdForSuspension(ctx, st); err != nil || st.suspension.Active != nil {
			// Suspended: differences are reported, nothing is written,
			// pruned or healed, no hook runs.
			return err
		}
	}
	if !r.cfg.DryRun && !r.cfg.SelfHeal && st.Revision == inv.Revision {
		// Self-heal is off and Git has not moved: report the drift only
		// (the revision's post-hooks still run once it is healthy).
		return r.hooksAfter(ctx, st)
	}
	if st.quiet != nil {
		// A quiet tick has nothing to write, and the inventory is what the
		// last full tick saved.
		return r.hooksAfter(ctx, st)
	}
	if len(writes) > 0 {
		vctx, span := startSpan(ctx, "recond.validate", attribute.Int("recond.objects.count", len(writes)))
		writes, err = r.validate(vctx, st, writes)
		endSpan(span, err)
		if err != nil {
			return err
		}
	}
	if r.cfg.DryRun {
		return nil
	}
	// A revision's pre-hooks run (and succeed) before anything of it is
	// written; while one runs, the tick writes nothing more.
	if ok, err := r.hooksBefore(ctx, st); !ok || err != nil {
		return err
	}
	// Record the kinds about to be written before writing them, with the
	// revision still the last one applied in full: if this tick stops half
	// way, the next one still lists (and can prune) what it wrote.
	if len(writes) > 0 {
		pre := nextInventory(st, owned)
		pre.Revision = inv.Revision
		for _, k := range inv.Kinds {
			pre.add(k)
		}
		if err := r.saveInventory(ctx, pre); err != nil {
			return err
		}
	}
	for _, wave := range waves(writes) {
		if err := r.recheckSuspension(ctx, st); err != nil {
			return err
		}
		results, err := r.inWave(ctx, st, wave, func(ctx context.Context, c diff.Change) outcome {
			octx, span := startSpan(ctx, "recond.apply.object", kindAttr(c.Kind), attribute.String("k8s.name", c.Name), attribute.String("recond.action", string(c.Action)))
			var out *unstructured.Unstructured
			var err error
			if st.recreating(c.Desired) {
				out, err = r.recreate(octx, c)
			} else {
				out, err = r.kube.ApplyFor(octx, cluster.Write{Purpose: cluster.PurposeApply, Object: c.Desired}, c.Live)
			}
			endSpan(span, err)
			return outcome{out: out, err: err}
		})
		for i, o := range results {
			if !o.ran {
				continue
			}
			c := wave[i]
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
				continue
			}
			st.wrote = true
			st.applied(c.Desired, o.out)
			// What the server made of the desired object is, by definition,
			// what applying it gives.
			r.equivalent.remember(c.Desired, o.out, verdictWritten)
			r.validated.done(c.Desired)
			owned[objectKey(c.Desired)] = true
			if c.Action == diff.Create {
				st.Counts.Created++
			} else {
				st.Counts.Updated++
			}
		}
		if err != nil {
			return writeFailed(st, err)
		}
	}
	for _, wave := range waves(deletes) {
		if err := r.recheckSuspension(ctx, st); err != nil {
			return err
		}
		results, err := r.inWave(ctx, st, wave, func(ctx context.Context, c diff.Change) outcome {
			octx, span := startSpan(ctx, "recond.apply.object", kindAttr(c.Kind), attribute.String("k8s.name", c.Name), attribute.String("recond.action", string(diff.Delete)))
			err := r.kube.Prune(octx, c.Live)
			if apierrors.IsConflict(err) {
				// Changed since observed: its watch event is on the way,
				// and the next tick judges it again.
				span.SetAttributes(attribute.Bool("recond.prune.deferred", true))
				endSpan(span, nil)
				return outcome{changed: true}
			}
			endSpan(span, err)
			return outcome{err: err}
		})
		for i, o := range results {
			if !o.ran {
				continue
			}
			c := wave[i]
			if o.changed {
				st.Deferred = append(st.Deferred, refOf(c.Live))
				st.Counts.Deferred++
				continue
			}
			st.Ops = append(st.Ops, Operation{Kind: c.Kind, Name: c.Name, Action: diff.Delete, Err: o.err, Duration: o.took,
				APIVersion: c.Live.GetAPIVersion(), UID: c.Live.GetUID(), ResourceVersion: c.Live.GetResourceVersion()})
			if o.err != nil {
				st.Counts.Refused++
				continue
			}
			st.wrote = true
			r.equivalent.forget(c.Live)
			// The kind stays in the inventory for one more tick: an object a
			// finalizer holds is still there, terminating, and must be seen.
			st.pruned = append(st.pruned, c.Live.GroupVersionKind())
			delete(owned, objectKey(c.Live))
			st.Counts.Pruned++
		}
		if err != nil {
			return writeFailed(st, err)
		}
	}
	if err := r.orphan(ctx, st, owned); err != nil {
		return err
	}
	next := nextInventory(st, owned)
	if err := r.saveInventory(ctx, next); err != nil {
		return err
	}
	st.inv = next
	st.RevisionApplied = inv.Revision != st.Revision
	// Post-hooks run once the revision was applied in full and a tick
	// found it healthy.
	return r.hooksAfter(ctx, st)
}

// orphan removes recond's labels and provenance annotations from the owned
// objects that left Git with recond.dev/prune: disabled: they are no
// longer recond's, and never pruned.
func (r *Reconciler) orphan(ctx context.Context, st *State, owned map[string]bool) error {
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
		r.equivalent.forget(l)
		delete(owned, objectKey(l))
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
func (r *Reconciler) validate(ctx context.Context, st *State, writes []diff.Change) ([]diff.Change, error) {
	opts := r.diffOptions()
	opts.Sensitive = st.sensitive
	// A create the server accepted in an earlier tick's dry run, unchanged
	// in Git since, is not validated again: a first sync of thousands of
	// objects that a tick timeout cut short goes on where it stopped.
	r.validated.expire()
	var check []diff.Change
	local := map[*unstructured.Unstructured]error{}
	for _, c := range writes {
		// A Secret's data the API server cannot decode is refused here,
		// naming the key (the server answers 500, quoting nothing useful).
		if err := secretData(c.Desired); err != nil {
			local[c.Desired] = err
			continue
		}
		if c.Action != diff.Create || !r.validated.holds(c.Desired, r.equivalent) {
			check = append(check, c)
		}
	}
	// The dry runs are independent of each other: all of them, every wave,
	// run in one bounded pool before the first write.
	results, err := r.inWave(ctx, st, check, func(ctx context.Context, c diff.Change) outcome {
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
			r.validated.add(c.Desired, r.equivalent)
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
		ierr, recreate := r.immutable(ctx, c, results[i].err)
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
			r.equivalent.remember(c.Desired, c.Live, verdictServer)
			st.dropChange(c)
			st.Equivalent = append(st.Equivalent, c.Kind+"/"+c.Name)
			st.Counts.Equivalent++
			continue
		}
		kept = append(kept, c)
	}
	return kept, nil
}

// validatedCreates remembers, by object and desired hash, the creates the
// server accepted in a dry run. Safe for concurrent use.
// A dry run's verdict is trusted for validatedFor only: admission, quotas
// and schemas change.
type validatedCreates struct {
	mu sync.Mutex
	m  map[string]validation
}

type validation struct {
	hash string
	at   time.Time
}

const validatedFor = 10 * time.Minute

func (v *validatedCreates) add(desired *unstructured.Unstructured, e *equivalence) {
	h := e.hashOf(desired)
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.m == nil {
		v.m = map[string]validation{}
	}
	v.m[objectKey(desired)] = validation{hash: h, at: time.Now()}
}

// expire forgets the verdicts older than validatedFor; once per validation,
// not per object.
func (v *validatedCreates) expire() {
	v.mu.Lock()
	defer v.mu.Unlock()
	for k, old := range v.m {
		if time.Since(old.at) > validatedFor {
			delete(v.m, k)
		}
	}
}

func (v *validatedCreates) holds(desired *unstructured.Unstructured, e *equivalence) bool {
	h := e.hashOf(desired)
	v.mu.Lock()
	defer v.mu.Unlock()
	got, ok := v.m[objectKey(desired)]
	return ok && h != "" && got.hash == h && time.Since(got.at) <= validatedFor
}

// done forgets a create once written.
func (v *validatedCreates) done(desired *unstructured.Unstructured) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.m, objectKey(desired))
}

// nextInventory keeps every kind Git names, every kind of which this
// instance still owns an object and every recorded kind the server does not
// serve now, and records the revision as applied.
func nextInventory(st *State, owned map[string]bool) *inventory {
	inv := &inventory{Revision: st.Revision}
	if st.inv != nil && len(st.Hooks) > 0 {
		// A revision without hooks forgets the last one's: going back to
		// it later runs its hooks again, as a new revision would.
		inv.Hooks = st.inv.Hooks.clone()
	}
	for _, d := range st.Desired {
		inv.add(d.GroupVersionKind())
	}
	for _, l := range st.Live {
		if owned[objectKey(l)] {
			inv.add(l.GroupVersionKind())
		}
	}
	for _, k := range st.unserved {
		inv.add(k)
	}
	for _, k := range st.pruned {
		inv.add(k)
	}
	return inv
}
