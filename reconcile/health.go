package reconcile

import (
	"context"
	"fmt"
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

// progress is what the health phase remembers of one object between ticks.
type progress struct {
	// raw is the assessment before the progress deadline.
	raw health.Status
	// status is the object's health at the last assessment (after the
	// progress deadline), since when it has had it.
	status health.Status
	since  time.Time
	// clock is when the progress deadline started counting: the last write
	// by recond, or the start of the current in-progress stretch, whichever
	// is later.
	clock time.Time
	// revision is the revision of recond's last write of the object ("" when
	// this process has not written it).
	revision string
	// rv is the resourceVersion last assessed, assessed what Assess said
	// of it (before the progress deadline).
	rv       string
	assessed health.Assessment
	meta     version
}

// version is what an object's metadata says of recond's last write of it.
type version struct {
	revision string    // recond.dev/revision
	changed  time.Time // recond's Apply entry in managedFields
}

// assessHealth is the health phase: the health of every object of the
// desired set (missing when it does not exist), from what this tick
// already holds (the objects apply wrote, as the server returned them,
// else what observe saw). It never
// calls the API server and never waits: a watch event on a status change
// asks for the next tick, whose observe sees it.
func (r *Reconciler) assessHealth(ctx context.Context, st *State) error {
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
	r.progressMu.Lock()
	defer r.progressMu.Unlock()
	if r.progress == nil {
		r.progress = map[string]*progress{}
	}
	seen := make(map[string]bool, len(st.Desired))
	h := &Health{Counts: make(map[health.Status]int, len(health.Statuses))}
	statuses := make([]health.Status, 0, len(st.Desired))
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
			delete(r.progress, k)
			continue
		}
		p := r.progress[k]
		var a health.Assessment
		var seenAt version
		if rv := obj.GetResourceVersion(); p != nil && rv != "" && rv == p.rv {
			// Unchanged since the last assessment: a converged tick of
			// thousands of objects costs a map lookup each.
			a, seenAt = p.assessed, p.meta
		} else {
			a = health.Assess(obj, r.cfg.HealthRules)
			seenAt = version{revision: obj.GetAnnotations()[AnnotationRevision], changed: appliedAt(obj)}
		}
		if p == nil {
			p = &progress{raw: a.Status, status: a.Status, since: now, clock: now}
			if a.Status == health.InProgress {
				// First seen (a new process, a new leader) while in
				// progress: the clock runs from recond's last apply that
				// changed it, as the object records it, not from now.
				if at := seenAt.changed; !at.IsZero() && at.Before(now) {
					p.clock, p.revision = at, seenAt.revision
				}
			}
			r.progress[k] = p
		}
		p.rv, p.assessed, p.meta = obj.GetResourceVersion(), a, seenAt
		if wrote[k] {
			p.clock, p.revision = now, st.Revision
		} else if a.Status == health.InProgress && p.raw != health.InProgress {
			p.clock = now // a new stretch of progress
		}
		p.raw = a.Status
		if a.Status == health.InProgress && now.Sub(p.clock) > timeout {
			a = health.Assessment{Status: health.Failed, Message: p.deadlineMessage(timeout, a.Message)}
		} else if a.Status == health.InProgress {
			if due := p.clock.Add(timeout); st.healthUntil.IsZero() || due.Before(st.healthUntil) {
				st.healthUntil = due
			}
		}
		if a.Status != p.status {
			p.status, p.since = a.Status, now
		}
		h.Objects = append(h.Objects, ObjectHealth{
			Ref: ObjectRef{APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Name: obj.GetName(), UID: obj.GetUID(),
				ResourceVersion: obj.GetResourceVersion()},
			Status: a.Status, Message: a.Message, Since: p.since,
			Revision: seenAt.revision, Changed: seenAt.changed,
		})
		h.Counts[a.Status]++
		statuses = append(statuses, a.Status)
	}
	for k := range r.progress {
		if !seen[k] {
			delete(r.progress, k)
		}
	}
	h.Status = health.Of(statuses)
	st.Health = h
	// Healthy at a revision counts only once it was applied in full (the
	// post-hooks wait for it); the objects of the one before may be
	// healthy under the same names.
	if inv := r.inventory(); h.Status == health.Healthy && st.Revision != "" && inv != nil && inv.Revision == st.Revision {
		rev := st.Revision
		if old := r.healthy.Swap(&rev); (old == nil || *old != rev) && inv.Hooks != nil && inv.Hooks.Revision == rev && inv.Hooks.Phase == "main" {
			r.TriggerAfter(TriggerHook, 0) // the post-hooks are due
		}
	}
	trace.SpanFromContext(ctx).SetAttributes(attribute.String("recond.health", string(h.Status)),
		attribute.Int("recond.objects.assessed", len(h.Objects)),
		attribute.Int("recond.objects.unhealthy", len(h.Objects)-h.Counts[health.Current]))
	return nil
}

// deadlineMessage says why an object is failed: in progress past the
// deadline. It names when the progress began rather than for how long, so
// that it stays the same from tick to tick.
func (p *progress) deadlineMessage(timeout time.Duration, why string) string {
	from := "first seen in progress"
	if p.revision != "" {
		from = "applied at revision " + shortSHA(p.revision)
	}
	msg := fmt.Sprintf("progress deadline: in progress since %s, longer than --health-timeout %s (%s)", p.clock.UTC().Format(time.RFC3339), timeout, from)
	if why != "" {
		msg += ": " + why
	}
	return msg
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
