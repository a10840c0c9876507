package reconcile

import (
	"context"
	"slices"

	"go.opentelemetry.io/otel/attribute"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"recond.dev/recond/internal/revision"
	"recond.dev/recond/reconcile/cluster"
	"recond.dev/recond/reconcile/diff"
	"recond.dev/recond/reconcile/generated"
	"recond.dev/recond/reconcile/optout"
	"recond.dev/recond/reconcile/verdict"
	"recond.dev/recond/reconcile/wave"
)

// diffOptions are the diff's rules for recond: what recond owns is what its
// field manager applied; the revision annotation moves with every commit and
// is never a reason to write.
var diffOptions = diff.Options{Manager: cluster.FieldManager, IgnoreAnnotations: []string{AnnotationRevision}}

// diff compares desired with live. The comparison itself is the pure
// diff.Objects; only where it cannot decide (a field Git sets that the live
// object lacks entirely, which the server may have transformed) a server-side
// dry-run apply settles it.
//
// Before anything is decided, ownership is checked: a live object that
// another instance owns fails the phase (ReasonConflict) and nothing is
// written or pruned. An owned object being deleted (deletionTimestamp set)
// is terminating: it is neither written nor deleted again until it is gone.
// An update the server has already shown to change nothing (same desired
// object, same live resourceVersion) is not an update.
func (t *tick) diff(ctx context.Context) error {
	r, st := t.r, t.st
	if len(st.Desired) == 0 && !r.cfg.AllowEmpty {
		return Invalidf("no objects in Git at %s under path %q: refusing to treat an empty desired state as \"delete everything\"; check --path, or pass --allow-empty if the namespace should really be emptied", shortSHA(st.Revision), r.cfg.Path)
	}
	if q := st.quiet; q != nil {
		// A quiet tick: the same desired objects against the same live
		// ones as the last full tick, which found no change.
		st.Skipped, st.Equivalent = q.skipped, q.equivalent
		st.Counts.Skipped, st.Counts.Equivalent = len(q.skipped), len(q.equivalent)
		return nil
	}
	// A full tick compares every object; an incremental one only those it
	// read again, and takes the rest from the last tick (merge).
	desired, live, byKey := st.Desired, st.Live, st.liveByKey
	if d := st.delta; d != nil {
		desired, live = d.desired, d.live
		byKey = func() map[string]*unstructured.Unstructured { return d.byKey }
	}
	if err := t.compare(ctx, desired, live, byKey); err != nil {
		return err
	}
	if d := st.delta; d != nil {
		d.merge(st)
	}
	t.order()
	st.Counts.Drifted = len(st.Changes)
	st.Counts.Skipped = len(st.Skipped)
	st.Counts.Terminating = len(st.Terminating)
	st.Counts.Equivalent = len(st.Equivalent)
	return nil
}

// compare is the diff of the objects desired and live (byKey indexes
// live): every object of the tick, or those an incremental tick read
// again. It appends what it finds to the tick's lists and sets its
// changes.
func (t *tick) compare(ctx context.Context, desiredAll, liveAll []*unstructured.Unstructured, byKey func() map[string]*unstructured.Unstructured) error {
	r, st := t.r, t.st
	t.prepareTypes(ctx, desiredAll)
	opts := r.diffOptions()
	opts.Sensitive = st.sensitive
	r.mem.verdictsAt(st.Revision)
	desired, live := t.unsettled(desiredAll, liveAll, byKey())
	desired, live = optOuts(st, desiredAll, liveAll, desired, live)
	for _, m := range st.misspelt {
		if r.mem.firstWarning(m) {
			r.log.WarnContext(ctx, "opt-out annotation on a live object with a value recond does not know: ignored", "annotation", m)
		}
	}
	desired = generated.Keep(desired, st.Generated, byKey(), objectKey)
	all := diff.Objects(desired, live, opts)
	var foreign []string
	for _, c := range all {
		if c.Live == nil {
			continue
		}
		if owner := foreignOwner(c.Live, r.cfg.Name); owner != "" {
			foreign = append(foreign, c.Kind+"/"+c.Name+" (instance "+owner+")")
		}
	}
	if len(foreign) > 0 {
		slices.Sort(foreign)
		return &OwnershipError{Objects: foreign}
	}
	var (
		changes  []diff.Change
		refusals []probeRefusal
	)
	for _, c := range all {
		var probeErr error
		if c.Live != nil && c.Live.GetDeletionTimestamp() != nil {
			st.Terminating = append(st.Terminating, c.Kind+"/"+c.Name)
			continue
		}
		if c.Action == diff.Update && r.mem.writtenAs(c.Desired, c.Live) {
			// The live object is what applying this desired one gave, yet
			// the local comparison differs: a normalisation gap.
			r.mem.remember(c.Desired, c.Live, verdict.Server)
			st.Equivalent = append(st.Equivalent, c.Kind+"/"+c.Name)
			continue
		}
		if c.Action == diff.Update && c.Uncertain {
			same, err := t.confirmUnchanged(ctx, c, opts)
			switch {
			case err != nil && !refused(err):
				return err
			case err != nil:
				// The server refused the update itself (an immutable
				// field, admission): judged with every other refusal
				// once the change is known to be written (probesRefused).
				probeErr = err
			case same:
				r.mem.remember(c.Desired, c.Live, verdict.Same)
				continue
			}
		}
		if c.Action == diff.Unchanged {
			r.mem.remember(c.Desired, c.Live, verdict.Same)
			continue
		}
		if c.Action == diff.Delete && !r.cfg.Prune {
			continue
		}
		if c.Action == diff.Delete && optout.NeverPruned(c.Live) {
			// Left Git, never to be deleted: orphaned by apply.
			st.Orphans = append(st.Orphans, c.Live)
			st.skip(c.Live, SkipPruneDisabled, nil)
			continue
		}
		if c.Action == diff.Update && optout.NeverUpdated(c.Desired) {
			// Created when missing, never updated.
			st.skip(c.Desired, SkipCreateOnly, nil)
			continue
		}
		if c.Action == diff.Update && generated.Whole(st.Generated[objectKey(c.Desired)]) {
			// Made whole by a key or certificate maker: the live one stays.
			continue
		}
		if c.Action == diff.Update && r.mem.heldBack(c.Kind+"/"+c.Name, c.Desired) {
			st.BackingOff = append(st.BackingOff, c.Kind+"/"+c.Name)
			continue
		}
		if probeErr != nil {
			refusals = append(refusals, probeRefusal{c: c, err: probeErr})
		}
		changes = append(changes, c)
	}
	if len(refusals) > 0 {
		var err error
		if changes, err = t.probesRefused(ctx, changes, refusals); err != nil {
			return err
		}
	}
	st.Changes = changes
	return nil
}

// unsettled returns the desired and live objects still to compare (of
// desiredAll and liveAll, byKey indexing the live ones): a pair
// whose verdict is remembered (the same desired object against the same
// live resourceVersion was found unchanged, or shown by the server to be
// equivalent) is settled without comparing it again, so that a converged
// tick costs O(changes). Server-equivalent ones are reported as such.
func (t *tick) unsettled(desiredAll, liveAll []*unstructured.Unstructured, byKey map[string]*unstructured.Unstructured) (desired, live []*unstructured.Unstructured) {
	r, st := t.r, t.st
	settled := map[string]bool{}
	desired = make([]*unstructured.Unstructured, 0, len(desiredAll))
	for _, d := range desiredAll {
		k := objectKey(d)
		l := byKey[k]
		if l != nil && l.GetDeletionTimestamp() == nil && foreignOwner(l, r.cfg.Name) == "" {
			// An object just written is compared once more: only that tells
			// a normalisation gap (counted) from agreement.
			if v, ok := r.mem.verdict(d, l); ok && v != verdict.Written {
				settled[k] = true
				if v == verdict.Server {
					st.Equivalent = append(st.Equivalent, d.GetKind()+"/"+d.GetName())
				}
				continue
			}
		}
		desired = append(desired, d)
	}
	if len(settled) == 0 {
		return desired, liveAll
	}
	live = make([]*unstructured.Unstructured, 0, max(len(liveAll)-len(settled), 0))
	for _, l := range liveAll {
		if !settled[objectKey(l)] {
			live = append(live, l)
		}
	}
	return desired, live
}

// diffOptions returns the diff's options with the reconciler's field types
// and Secret salt.
func (r *Reconciler) diffOptions() diff.Options {
	o := diffOptions
	o.Types = r.kube.FieldTypes()
	o.SecretSalt = r.salt
	return o
}

// prepareTypes makes sure the field types of every kind of desired are known
// (one schema fetch for a kind not seen before; none once warm). Without
// them the diff falls back to rules by field name, and the server-side
// equivalence check still keeps a gap from becoming a rewrite.
func (t *tick) prepareTypes(ctx context.Context, desired []*unstructured.Unstructured) {
	r := t.r
	seen := map[schema.GroupVersionKind]bool{}
	var gvks []schema.GroupVersionKind
	for _, d := range desired {
		if k := d.GroupVersionKind(); !seen[k] {
			seen[k] = true
			gvks = append(gvks, k)
		}
	}
	sctx, span := startSpan(ctx, "recond.schema", attribute.Int("recond.kinds.count", len(gvks)))
	err := r.kube.FieldTypes().Prepare(sctx, gvks)
	endSpan(span, err)
	if err != nil {
		r.log.WarnContext(ctx, "field types from the OpenAPI schema unavailable; comparing by field name", "error", err)
	}
}

// foreignOwner returns the instance named by an object's
// recond.dev/instance label when that is not instance, else "".
func foreignOwner(u *unstructured.Unstructured, instance string) string {
	if owner, ok := u.GetLabels()[LabelInstance]; ok && owner != instance {
		return owner
	}
	return ""
}

// confirmUnchanged asks the server what applying c.Desired would produce and
// compares that with live.
func (t *tick) confirmUnchanged(ctx context.Context, c diff.Change, opts diff.Options) (bool, error) {
	probe := c.Desired.DeepCopy()
	ann := probe.GetAnnotations()
	if rev, ok := c.Live.GetAnnotations()[AnnotationRevision]; ok {
		ann[AnnotationRevision] = rev
	}
	probe.SetAnnotations(ann)
	ctx, span := startSpan(ctx, "recond.dryrun", kindAttr(c.Kind), attribute.String("k8s.name", c.Name))
	out, err := t.r.kube.Apply(ctx, probe, true)
	endSpan(span, err)
	if err != nil {
		return false, err
	}
	return len(diff.Equivalent(out, c.Live, opts)) == 0, nil
}

// probeRefusal is an update whose confirming dry run the server refused.
type probeRefusal struct {
	c   diff.Change
	err error
}

// probesRefused judges the updates the server refused to dry-run for
// confirmUnchanged, among changes (what the tick would write). An
// immutable field that recond.dev/force: recreate lets the apply recreate
// is a change like any (the apply's validate recreates it). Any other
// refusal fails the phase, and the failure names every object the
// commit's writes are refused for, not only the probed ones, each in
// st.Rejected: validate dry-runs them all, as the apply would before its
// first write. Should the server accept them all this time (admission
// changed in between), the tick goes on with what validate kept.
func (t *tick) probesRefused(ctx context.Context, changes []diff.Change, refusals []probeRefusal) ([]diff.Change, error) {
	failing := false
	for _, p := range refusals {
		if _, recreate := (recreator{t.r}).refusal(ctx, p.c, p.err); !recreate {
			failing = true
		}
	}
	if !failing {
		return changes, nil
	}
	var writes []diff.Change
	for _, c := range changes {
		if c.Action != diff.Delete {
			writes = append(writes, c)
		}
	}
	slices.SortStableFunc(writes, wave.ByDependency)
	kept, err := t.validate(ctx, writes)
	if err != nil {
		return nil, err
	}
	keep := make(map[*unstructured.Unstructured]bool, len(kept))
	for _, c := range kept {
		keep[c.Desired] = true
	}
	return slices.DeleteFunc(changes, func(c diff.Change) bool { return c.Action != diff.Delete && !keep[c.Desired] }), nil
}

// shortSHA is a revision cut to 12 hex digits, in log lines and errors.
func shortSHA(s string) string { return revision.Abbrev(s, 12) }
