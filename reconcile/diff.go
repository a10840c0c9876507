package reconcile

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"slices"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"recond.dev/recond/internal/revision"
	"recond.dev/recond/reconcile/cluster"
	"recond.dev/recond/reconcile/diff"
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
func (r *Reconciler) diff(ctx context.Context, st *State) error {
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
	r.prepareTypes(ctx, st)
	opts := r.diffOptions()
	opts.Sensitive = st.sensitive
	r.equivalent.at(st.Revision)
	desired, live := r.unsettled(st)
	desired, live = optOuts(st, desired, live)
	for _, m := range st.misspelt {
		if _, said := r.misspelt.LoadOrStore(m, true); !said {
			r.log.WarnContext(ctx, "opt-out annotation on a live object with a value recond does not know: ignored", "annotation", m)
		}
	}
	desired = keepGenerated(st, desired)
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
		if c.Action == diff.Update && r.writtenAs(c) {
			// The live object is what applying this desired one gave, yet
			// the local comparison differs: a normalisation gap.
			r.equivalent.remember(c.Desired, c.Live, verdictServer)
			st.Equivalent = append(st.Equivalent, c.Kind+"/"+c.Name)
			continue
		}
		if c.Action == diff.Update && c.Uncertain {
			same, err := r.confirmUnchanged(ctx, c, opts)
			switch {
			case err != nil && !refused(err):
				return err
			case err != nil:
				// The server refused the update itself (an immutable
				// field, admission): judged with every other refusal
				// once the change is known to be written (probesRefused).
				probeErr = err
			case same:
				r.equivalent.remember(c.Desired, c.Live, verdictSame)
				continue
			}
		}
		if c.Action == diff.Unchanged {
			r.equivalent.remember(c.Desired, c.Live, verdictSame)
			continue
		}
		if c.Action == diff.Delete && !r.cfg.Prune {
			continue
		}
		if c.Action == diff.Delete && c.Live.GetAnnotations()[AnnotationPrune] == "disabled" {
			// Left Git, never to be deleted: orphaned by apply.
			st.Orphans = append(st.Orphans, c.Live)
			st.skip(c.Live, SkipPruneDisabled, nil)
			continue
		}
		if c.Action == diff.Update && c.Desired.GetAnnotations()[AnnotationApply] == "create-only" {
			// Created when missing, never updated.
			st.skip(c.Desired, SkipCreateOnly, nil)
			continue
		}
		if c.Action == diff.Update && wholeGenerated(st.Generated[objectKey(c.Desired)]) {
			// Made whole by a key or certificate maker: the live one stays.
			continue
		}
		if c.Action == diff.Update && r.selfHealHeldBack(c) {
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
		if changes, err = r.probesRefused(ctx, st, changes, refusals); err != nil {
			return err
		}
	}
	st.Changes = changes
	st.Counts.Drifted = len(changes)
	st.Counts.Skipped = len(st.Skipped)
	st.Counts.Terminating = len(st.Terminating)
	st.Counts.Equivalent = len(st.Equivalent)
	return nil
}

// unsettled returns the desired and live objects still to compare: a pair
// whose verdict is remembered (the same desired object against the same
// live resourceVersion was found unchanged, or shown by the server to be
// equivalent) is settled without comparing it again, so that a converged
// tick costs O(changes). Server-equivalent ones are reported as such.
func (r *Reconciler) unsettled(st *State) (desired, live []*unstructured.Unstructured) {
	byKey := st.liveByKey()
	settled := map[string]bool{}
	desired = make([]*unstructured.Unstructured, 0, len(st.Desired))
	for _, d := range st.Desired {
		k := objectKey(d)
		l := byKey[k]
		if l != nil && l.GetDeletionTimestamp() == nil && foreignOwner(l, r.cfg.Name) == "" {
			// An object just written is compared once more: only that tells
			// a normalisation gap (counted) from agreement.
			if v, ok := r.equivalent.holds(d, l); ok && v != verdictWritten {
				settled[k] = true
				if v == verdictServer {
					st.Equivalent = append(st.Equivalent, d.GetKind()+"/"+d.GetName())
				}
				continue
			}
		}
		desired = append(desired, d)
	}
	if len(settled) == 0 {
		return desired, st.Live
	}
	live = make([]*unstructured.Unstructured, 0, len(st.Live)-len(settled))
	for _, l := range st.Live {
		if !settled[objectKey(l)] {
			live = append(live, l)
		}
	}
	return desired, live
}

// writtenAs reports whether c's live object is what recond's last apply of
// c's desired object returned.
func (r *Reconciler) writtenAs(c diff.Change) bool {
	v, ok := r.equivalent.holds(c.Desired, c.Live)
	return ok && v == verdictWritten
}

// selfHealHeldBack reports whether c only undoes another manager's change
// (Git did not change the object since recond last applied it) of an object
// in a fight, whose self-heal is backing off.
func (r *Reconciler) selfHealHeldBack(c diff.Change) bool {
	if _, ok := r.heal.backingOff(c.Kind + "/" + c.Name); !ok {
		return false
	}
	return r.equivalent.applied(c.Desired)
}

// diffOptions returns the diff's options with the reconciler's field types
// and Secret salt.
func (r *Reconciler) diffOptions() diff.Options {
	o := diffOptions
	o.Types = r.kube.FieldTypes()
	o.SecretSalt = r.salt
	return o
}

// prepareTypes makes sure the field types of every desired kind are known
// (one schema fetch for a kind not seen before; none once warm). Without
// them the diff falls back to rules by field name, and the server-side
// equivalence check still keeps a gap from becoming a rewrite.
func (r *Reconciler) prepareTypes(ctx context.Context, st *State) {
	seen := map[schema.GroupVersionKind]bool{}
	var gvks []schema.GroupVersionKind
	for _, d := range st.Desired {
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
func (r *Reconciler) confirmUnchanged(ctx context.Context, c diff.Change, opts diff.Options) (bool, error) {
	probe := c.Desired.DeepCopy()
	ann := probe.GetAnnotations()
	if rev, ok := c.Live.GetAnnotations()[AnnotationRevision]; ok {
		ann[AnnotationRevision] = rev
	}
	probe.SetAnnotations(ann)
	ctx, span := startSpan(ctx, "recond.dryrun", kindAttr(c.Kind), attribute.String("k8s.name", c.Name))
	out, err := r.kube.Apply(ctx, probe, true)
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
func (r *Reconciler) probesRefused(ctx context.Context, st *State, changes []diff.Change, refusals []probeRefusal) ([]diff.Change, error) {
	failing := false
	for _, p := range refusals {
		if _, recreate := r.immutable(ctx, p.c, p.err); !recreate {
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
	slices.SortStableFunc(writes, byDependency)
	kept, err := r.validate(ctx, st, writes)
	if err != nil {
		return nil, err
	}
	keep := make(map[*unstructured.Unstructured]bool, len(kept))
	for _, c := range kept {
		keep[c.Desired] = true
	}
	return slices.DeleteFunc(changes, func(c diff.Change) bool { return c.Action != diff.Delete && !keep[c.Desired] }), nil
}

// equivalence remembers, per object, a desired object (by hash) that the
// server has shown to be equivalent to a live object (by resourceVersion):
// applying it changed nothing, or the object is the result of applying it.
// Where the local comparison still sees a difference (a normalisation it does
// not know), the object is reported converged instead of being rewritten at
// every tick, until either side changes. Kept in memory: after a restart the
// apply phase's dry run finds the same again without writing.
type equivalence struct {
	mu sync.Mutex
	m  map[string]equivalent
	// hashes caches desiredHash per desired object of the revision rev
	// (the render is reused while the revision does not move).
	rev    string
	hashes map[*unstructured.Unstructured]string
}

type equivalent struct {
	hash, resourceVersion string
	verdict               verdict
}

// verdict is how a desired object was found equivalent to a live one.
type verdict uint8

const (
	// verdictWritten: the live object is the result of applying the
	// desired one (not compared yet).
	verdictWritten verdict = iota
	// verdictSame: the local comparison found no difference.
	verdictSame
	// verdictServer: the local comparison saw a difference that the server
	// showed to change nothing (a dry run): a normalisation gap.
	verdictServer
)

func newEquivalence() *equivalence {
	return &equivalence{m: map[string]equivalent{}, hashes: map[*unstructured.Unstructured]string{}}
}

// at starts a tick at revision rev: hashes of another revision's objects
// are dropped.
func (e *equivalence) at(rev string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if rev != e.rev {
		e.rev, e.hashes = rev, map[*unstructured.Unstructured]string{}
	}
}

// hash returns desiredHash(u), once per object. e.mu must be held.
func (e *equivalence) hash(u *unstructured.Unstructured) string {
	if h, ok := e.hashes[u]; ok {
		return h
	}
	h := desiredHash(u)
	e.hashes[u] = h
	return h
}

// hashOf returns the (cached) hash of a desired object.
func (e *equivalence) hashOf(u *unstructured.Unstructured) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.hash(u)
}

// remember records that desired is equivalent to live, and how that is
// known. Safe for concurrent use (apply writes in parallel).
func (e *equivalence) remember(desired, live *unstructured.Unstructured, how verdict) {
	if live == nil || live.GetResourceVersion() == "" {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.m[objectKey(desired)] = equivalent{hash: e.hash(desired), resourceVersion: live.GetResourceVersion(), verdict: how}
}

// holds reports whether desired is known equivalent to live as it is now,
// and how.
func (e *equivalence) holds(desired, live *unstructured.Unstructured) (verdict, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	got, found := e.m[objectKey(desired)]
	if !found || got.resourceVersion != live.GetResourceVersion() || got.hash != e.hash(desired) {
		return 0, false
	}
	return got.verdict, true
}

// applied reports whether desired, as it is, is what recond last applied
// (or found equivalent) for its object: Git has not changed it since.
func (e *equivalence) applied(desired *unstructured.Unstructured) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	got, ok := e.m[objectKey(desired)]
	return ok && got.hash == e.hash(desired)
}

// forget drops what was remembered of an object.
func (e *equivalence) forget(u *unstructured.Unstructured) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, objectKey(u))
}

// desiredHash hashes a desired object without its revision annotation, which
// moves with every commit without changing the object.
func desiredHash(u *unstructured.Unstructured) string {
	c := u.DeepCopy()
	ann := c.GetAnnotations()
	delete(ann, AnnotationRevision)
	c.SetAnnotations(ann)
	b, err := json.Marshal(c.Object)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// shortSHA is a revision cut to 12 hex digits, in log lines and errors.
func shortSHA(s string) string { return revision.Abbrev(s, 12) }

// keepGenerated returns desired with, for each object whose fields a
// chart's key or certificate maker made (st.Generated) and that exists,
// a copy whose generated fields hold the live values: such a field is
// written when the object is created, and never rewritten because a
// render made another key. The render's objects are not changed.
func keepGenerated(st *State, desired []*unstructured.Unstructured) []*unstructured.Unstructured {
	if len(st.Generated) == 0 {
		return desired
	}
	byKey := st.liveByKey()
	out := desired
	for i, d := range desired {
		k := objectKey(d)
		paths, l := st.Generated[k], byKey[k]
		if len(paths) == 0 || l == nil || wholeGenerated(paths) {
			continue
		}
		if &out[0] == &desired[0] {
			out = slices.Clone(desired)
		}
		c := d.DeepCopy()
		for _, p := range paths {
			if !keptGenerated(d, l, p) {
				continue
			}
			v, found, _ := unstructured.NestedFieldNoCopy(l.Object, p...)
			if !found && len(p) == 2 && p[0] == "stringData" {
				// The server keeps a Secret's stringData under data.
				if enc, ok, _ := unstructured.NestedString(l.Object, "data", p[1]); ok {
					if dec, err := base64.StdEncoding.DecodeString(enc); err == nil {
						v, found = string(dec), true
					}
				}
			}
			if found {
				_ = unstructured.SetNestedField(c.Object, runtime.DeepCopyJSONValue(v), p...)
			}
		}
		out[i] = c
	}
	return out
}

// wholeGenerated reports whether paths stand for the whole object.
func wholeGenerated(paths [][]string) bool {
	return len(paths) == 1 && len(paths[0]) == 0
}
