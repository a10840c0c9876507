package reconcile

import (
	"context"

	"go.opentelemetry.io/otel/attribute"

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
func (r *Reconciler) diff(ctx context.Context, st *State) error {
	if len(st.Desired) == 0 && !r.cfg.AllowEmpty {
		return Invalidf("no objects in Git at %s under path %q: refusing to treat an empty desired state as \"delete everything\"; check --path, or pass --allow-empty if the namespace should really be emptied", shortSHA(st.Revision), r.cfg.Path)
	}
	var changes []diff.Change
	for _, c := range diff.Objects(st.Desired, st.Live, diffOptions) {
		if c.Action == diff.Update && c.Uncertain {
			same, err := r.confirmUnchanged(ctx, c)
			if err != nil {
				return err
			}
			if same {
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
	return nil
}

// confirmUnchanged asks the server what applying c.Desired would produce and
// compares that with live.
func (r *Reconciler) confirmUnchanged(ctx context.Context, c diff.Change) (bool, error) {
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
	return len(diff.Equivalent(out, c.Live, diffOptions)) == 0, nil
}

func shortSHA(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}
