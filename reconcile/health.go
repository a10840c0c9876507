package reconcile

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"recond.dev/recond/reconcile/cluster"
	"recond.dev/recond/reconcile/diff"
	"recond.dev/recond/reconcile/health"
	"recond.dev/recond/reconcile/optout"
)

// DefaultHealthTimeout is --health-timeout's default.
const DefaultHealthTimeout = 5 * time.Minute

// assessHealth is the health phase: the health of every object of the
// desired set (missing when it does not exist), from what this tick
// already holds (the objects apply wrote, as the server returned them,
// else what observe saw). It never
// calls the API server and never waits: a watch event on a status change
// asks for the next tick, whose observe sees it.
func (t *tick) assessHealth(ctx context.Context) error {
	r, st := t.r, t.st
	now := time.Now()
	timeout := r.cfg.HealthTimeout
	if timeout <= 0 {
		timeout = DefaultHealthTimeout
	}
	if q := st.quiet; q != nil && q.health != nil && (q.healthUntil.IsZero() || now.Before(q.healthUntil)) {
		// A quiet tick before any progress deadline: no object changed, so
		// neither did their health.
		st.Health, st.healthUntil = q.health, q.healthUntil
		h := q.health
		trace.SpanFromContext(ctx).SetAttributes(attribute.String("recond.health", string(h.Status)),
			attribute.Int("recond.objects.assessed", 0),
			attribute.Int("recond.objects.unhealthy", len(h.Objects)-h.Counts[health.Current]))
		return nil
	}
	live := st.liveByKey()
	pruned := map[string]bool{}
	wrote := map[string]bool{}
	for _, op := range st.Ops {
		if op.Err != nil {
			continue
		}
		k := opKey(op)
		if op.Action == diff.Delete {
			pruned[k] = true
		} else {
			wrote[k] = true
		}
	}
	pass := &health.Pass{Now: now, Timeout: timeout, Rules: r.cfg.HealthRules, Revision: st.Revision, Written: lastWrite}
	seen := make(map[string]bool, len(st.Desired))
	h := &Health{Counts: make(map[health.Status]int, len(health.Statuses))}
	statuses := make([]health.Status, 0, len(st.Desired))
	r.mem.assess(func(progress *health.Progress) {
		for _, d := range st.Desired {
			k := objectKey(d)
			obj := st.written[k]
			if obj == nil {
				obj = live[k]
			}
			if pruned[k] || seen[k] {
				continue
			}
			seen[k] = true
			if obj == nil && optout.Disabled(d) {
				// Taken out of recond's hands and not there: not recond's to
				// miss (one that is there is assessed like any other).
				continue
			}
			if obj == nil {
				// Desired and not there: a write the server refused, one the
				// tick never reached, a dry run. Not healthy, whatever the rest.
				h.Objects = append(h.Objects, ObjectHealth{
					Ref:    ObjectRef{APIVersion: d.GetAPIVersion(), Kind: d.GetKind(), Name: d.GetName()},
					Status: health.Missing, Message: "desired, and not in the cluster",
				})
				h.Counts[health.Missing]++
				statuses = append(statuses, health.Missing)
				progress.Forget(k)
				continue
			}
			f := progress.Assess(pass, k, obj, wrote[k])
			h.Objects = append(h.Objects, ObjectHealth{
				Ref: ObjectRef{APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Name: obj.GetName(), UID: obj.GetUID(),
					ResourceVersion: obj.GetResourceVersion()},
				Status: f.Status, Message: f.Message, Since: f.Since,
				Revision: f.Written.Revision, Changed: f.Written.Changed,
			})
			h.Counts[f.Status]++
			statuses = append(statuses, f.Status)
		}
		progress.Keep(seen)
	})
	st.healthUntil = pass.Due
	h.Status = health.Of(statuses)
	st.Health = h
	// Healthy at a revision counts only once it was applied in full (the
	// post-hooks wait for it); the objects of the one before may be
	// healthy under the same names.
	if inv := r.mem.inventory(); h.Status == health.Healthy && st.Revision != "" && inv != nil && inv.Revision == st.Revision {
		rev := st.Revision
		if old := r.mem.setHealthy(rev); old != rev && inv.Hooks != nil && inv.Hooks.Revision == rev && inv.Hooks.Phase == "main" {
			r.TriggerAfter(TriggerHook, 0) // the post-hooks are due
		}
	}
	trace.SpanFromContext(ctx).SetAttributes(attribute.String("recond.health", string(h.Status)),
		attribute.Int("recond.objects.assessed", len(h.Objects)),
		attribute.Int("recond.objects.unhealthy", len(h.Objects)-h.Counts[health.Current]))
	return nil
}

// lastWrite is what obj's metadata says of recond's last write of it: the
// revision annotation, and the time of recond's Apply entry in
// managedFields.
func lastWrite(obj *unstructured.Unstructured) health.Written {
	return health.Written{Revision: obj.GetAnnotations()[AnnotationRevision], Changed: appliedAt(obj)}
}

// opKey is objectKey for an operation.
func opKey(op Operation) string {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(op.APIVersion)
	u.SetKind(op.Kind)
	u.SetName(op.Name)
	return objectKey(u)
}

// appliedAt is when recond's apply last changed obj: the time of its Apply
// entry in managedFields (zero when it has none).
func appliedAt(obj *unstructured.Unstructured) time.Time {
	entries, _, _ := unstructured.NestedSlice(obj.Object, "metadata", "managedFields")
	for _, e := range entries {
		m, ok := e.(map[string]any)
		if !ok || m["manager"] != cluster.FieldManager || m["operation"] != "Apply" || m["subresource"] != nil && m["subresource"] != "" {
			continue
		}
		s, _ := m["time"].(string)
		if t, err := time.Parse(time.RFC3339, s); err == nil {
			return t
		}
	}
	return time.Time{}
}
