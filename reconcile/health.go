package reconcile

import (
	"context"
	"maps"
	"slices"
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
	if d := st.delta; d != nil && t.assessDelta(ctx, now, timeout, d) {
		return nil
	}
	live := st.liveByKey()
	pruned, wrote := st.opKeys()
	pass := &health.Pass{Now: now, Timeout: timeout, Rules: r.cfg.HealthRules, Revision: st.Revision, Written: lastWrite}
	seen := make(map[string]bool, len(st.Desired))
	h := &Health{Counts: make(map[health.Status]int, len(health.Statuses))}
	r.mem.assess(func(progress *health.Progress) {
		for _, d := range st.Desired {
			k := objectKey(d)
			if pruned[k] || seen[k] {
				continue
			}
			seen[k] = true
			if oh, ok := st.objectHealth(progress, pass, d, k, live[k], wrote[k]); ok {
				h.Objects = append(h.Objects, oh)
				h.Counts[oh.Status]++
			}
		}
		progress.Keep(seen)
	})
	st.healthUntil = pass.Due
	t.assessed(ctx, h)
	return nil
}

// opKeys are the objects the tick's operations pruned and wrote, by
// objectKey.
func (st *State) opKeys() (pruned, wrote map[string]bool) {
	pruned, wrote = map[string]bool{}, map[string]bool{}
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
	return pruned, wrote
}

// objectHealth is the health of the desired object d (key k): of what the
// tick wrote of it, else of what observe saw (observed, nil when it does
// not exist); ok is false for an object left out of the assessment (taken
// out of recond's hands and not there).
func (st *State) objectHealth(progress *health.Progress, pass *health.Pass, d *unstructured.Unstructured, k string, observed *unstructured.Unstructured, wrote bool) (ObjectHealth, bool) {
	obj := st.written[k]
	if obj == nil {
		obj = observed
	}
	if obj == nil && optout.Disabled(d) {
		// Taken out of recond's hands and not there: not recond's to
		// miss (one that is there is assessed like any other).
		return ObjectHealth{}, false
	}
	if obj == nil {
		// Desired and not there: a write the server refused, one the
		// tick never reached, a dry run. Not healthy, whatever the rest.
		progress.Forget(k)
		return ObjectHealth{
			Ref:    ObjectRef{APIVersion: d.GetAPIVersion(), Kind: d.GetKind(), Name: d.GetName()},
			Status: health.Missing, Message: "desired, and not in the cluster",
		}, true
	}
	f := progress.Assess(pass, k, obj, wrote)
	return ObjectHealth{
		Ref: ObjectRef{APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Name: obj.GetName(), UID: obj.GetUID(),
			ResourceVersion: obj.GetResourceVersion()},
		Status: f.Status, Message: f.Message, Since: f.Since,
		Revision: f.Written.Revision, Changed: f.Written.Changed,
	}, true
}

// assessDelta is the health phase of an incremental tick: the last tick's
// assessment, with the objects read again (and written) assessed anew.
// It reports false, having changed nothing, when the full assessment is
// needed: no assessment to build on, an object in progress then (a
// progress deadline may pass without any change), or an object that
// enters or leaves the assessment.
func (t *tick) assessDelta(ctx context.Context, now time.Time, timeout time.Duration, d *deltaTick) bool {
	r, st := t.r, t.st
	b := d.base
	if b.health == nil || b.healthIdx == nil || !b.healthUntil.IsZero() {
		return false
	}
	pruned, wrote := st.opKeys()
	pass := &health.Pass{Now: now, Timeout: timeout, Rules: r.cfg.HealthRules, Revision: st.Revision, Written: lastWrite}
	h := &Health{Objects: slices.Clone(b.health.Objects), Counts: maps.Clone(b.health.Counts)}
	if h.Counts == nil {
		h.Counts = map[health.Status]int{}
	}
	ok := true
	r.mem.assess(func(progress *health.Progress) {
		for _, dd := range d.desired {
			k := objectKey(dd)
			i, was := b.healthIdx[k]
			if pruned[k] {
				ok = ok && !was
				continue
			}
			oh, is := st.objectHealth(progress, pass, dd, k, d.byKey[k], wrote[k])
			if was != is {
				ok = false
				continue
			}
			if !is {
				continue
			}
			h.Counts[h.Objects[i].Status]--
			h.Objects[i] = oh
			h.Counts[oh.Status]++
		}
	})
	if !ok {
		// The full assessment assesses those objects again at the same
		// time, from the progress recorded now: it finds the same.
		return false
	}
	for s, n := range h.Counts {
		if n == 0 {
			delete(h.Counts, s)
		}
	}
	d.incrementalHealth = true
	st.healthUntil = pass.Due
	t.assessed(ctx, h)
	return true
}

// assessed ends the health phase with h, its objects and counts known.
func (t *tick) assessed(ctx context.Context, h *Health) {
	r, st := t.r, t.st
	statuses := make([]health.Status, 0, len(h.Counts))
	for s, n := range h.Counts {
		if n > 0 {
			statuses = append(statuses, s)
		}
	}
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
