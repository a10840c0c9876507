package reconcile

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"

	"go.opentelemetry.io/otel/attribute"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

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
	r.prepareTypes(ctx, st)
	opts := r.diffOptions()
	all := diff.Objects(st.Desired, st.Live, opts)
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
	var changes []diff.Change
	for _, c := range all {
		if c.Live != nil && c.Live.GetDeletionTimestamp() != nil {
			st.Terminating = append(st.Terminating, c.Kind+"/"+c.Name)
			continue
		}
		if c.Action == diff.Update && r.equivalent.holds(c.Desired, c.Live) {
			st.Equivalent = append(st.Equivalent, c.Kind+"/"+c.Name)
			continue
		}
		if c.Action == diff.Update && c.Uncertain {
			same, err := r.confirmUnchanged(ctx, c, opts)
			if err != nil {
				return err
			}
			if same {
				r.equivalent.remember(c.Desired, c.Live)
				continue
			}
		}
		if c.Action == diff.Unchanged || (c.Action == diff.Delete && !r.cfg.Prune) {
			continue
		}
		changes = append(changes, c)
	}
	st.Changes = changes
	st.Counts.Drifted = len(changes)
	st.Counts.Terminating = len(st.Terminating)
	st.Counts.Equivalent = len(st.Equivalent)
	return nil
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

// equivalence remembers, per object, a desired object (by hash) that the
// server has shown to be equivalent to a live object (by resourceVersion):
// applying it changed nothing, or the object is the result of applying it.
// Where the local comparison still sees a difference (a normalisation it does
// not know), the object is reported converged instead of being rewritten at
// every tick, until either side changes. Kept in memory: after a restart the
// apply phase's dry run finds the same again without writing.
type equivalence map[string]equivalent

type equivalent struct{ hash, resourceVersion string }

// remember records that desired is equivalent to live.
func (e equivalence) remember(desired, live *unstructured.Unstructured) {
	if live == nil || live.GetResourceVersion() == "" {
		return
	}
	e[objectKey(desired)] = equivalent{hash: desiredHash(desired), resourceVersion: live.GetResourceVersion()}
}

// holds reports whether desired was shown equivalent to live as it is now.
func (e equivalence) holds(desired, live *unstructured.Unstructured) bool {
	got, ok := e[objectKey(desired)]
	return ok && got.resourceVersion == live.GetResourceVersion() && got.hash == desiredHash(desired)
}

// forget drops what was remembered of an object.
func (e equivalence) forget(u *unstructured.Unstructured) { delete(e, objectKey(u)) }

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

func shortSHA(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}
