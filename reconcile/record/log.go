package record

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"recond.dev/recond/internal/revision"
	"recond.dev/recond/reconcile/failure"
)

// LogObserver writes one line per phase failure, one per change found and
// written, and one summary line per tick.
type LogObserver struct{ Log *slog.Logger }

// TickStart implements Observer.
func (LogObserver) TickStart(ctx context.Context) context.Context { return ctx }

// PhaseStart implements Observer.
func (LogObserver) PhaseStart(ctx context.Context, _ Phase) context.Context { return ctx }

// PhaseEnd logs a failed phase.
func (o LogObserver) PhaseEnd(ctx context.Context, pr PhaseResult, r *Result) {
	if pr.Err == nil {
		return
	}
	var id uint64
	if r != nil {
		id = r.ID
	}
	o.Log.ErrorContext(ctx, "phase failed", "tick_id", id,
		"phase", string(pr.Phase), "reason", string(pr.Err.Reason), "error", pr.Err.Err.Error(),
		"duration", pr.Duration.Round(100_000).String())
}

// TickEnd logs what the tick changed and its summary.
func (o LogObserver) TickEnd(ctx context.Context, r *Result) {
	rev := revision.Abbrev(r.Revision, 12)
	for _, c := range r.Changes {
		text, more := DifferenceText(c)
		attrs := []any{"revision", rev, "object", c.Kind + "/" + c.Name, "action", string(c.Action), "diff", text}
		if more > 0 {
			attrs = append(attrs, "more_fields", more)
		}
		o.Log.InfoContext(ctx, "difference", attrs...)
	}
	for _, h := range r.Hooks {
		// A plan (recond diff, --dry-run): what each hook would create,
		// delete first, or be refused.
		attrs := []any{"revision", rev, "hook", h.Hook, "events", strings.Join(h.Events, ","), "weight", h.Weight, "creates", h.Hook}
		if h.Deletes != "" {
			attrs = append(attrs, "deletes_first", h.Deletes)
		}
		if h.Refused != "" {
			attrs = append(attrs, "refused", h.Refused)
		}
		o.Log.InfoContext(ctx, "hook plan", attrs...)
	}
	for _, op := range r.Ops {
		if op.Err != nil {
			o.Log.ErrorContext(ctx, "write failed", "object", op.Kind+"/"+op.Name, "action", string(op.Action), "error", op.Err.Error())
		}
	}
	for _, h := range r.Heals {
		if h.Fight {
			o.Log.WarnContext(ctx, "another manager keeps changing an object recond owns; self-heal backs off",
				"object", h.Kind+"/"+h.Name, "backoff", h.Backoff.String())
		}
	}
	attrs := []any{
		"tick_id", r.ID, "revision", rev, "trigger", string(r.Trigger), "outcome", string(r.Outcome), "duration", r.Duration.Round(100_000).String(),
	}
	for _, p := range Phases {
		if d := r.PhaseDuration(p); d > 0 {
			attrs = append(attrs, string(p), d.Round(100_000).String())
		}
	}
	attrs = append(attrs,
		"desired", r.Counts.Desired, "drifted", r.Counts.Drifted, "created", r.Counts.Created,
		"updated", r.Counts.Updated, "pruned", r.Counts.Pruned)
	if r.Quiet {
		attrs = append(attrs, "quiet", true)
	}
	if c := r.Counts; c.Refused > 0 || c.NotWritten > 0 {
		// A partial apply says so: what was written, refused and left.
		attrs = append(attrs, "written", c.Written(), "refused", c.Refused, "not_written", c.NotWritten, "partial", r.Partial())
	}
	if len(r.Rejected) > 0 {
		attrs = append(attrs, "rejected", len(r.Rejected))
	}
	if r.Counts.Terminating > 0 {
		attrs = append(attrs, "terminating", r.Counts.Terminating, "terminating_objects", failure.JoinList(r.Terminating))
	}
	if len(r.Heals) > 0 {
		var worst time.Duration
		for _, h := range r.Heals {
			worst = max(worst, h.Latency)
		}
		attrs = append(attrs, "healed", len(r.Heals), "heal_latency", worst.Round(100_000).String())
	}
	if len(r.BackingOff) > 0 {
		attrs = append(attrs, "backing_off", failure.JoinList(r.BackingOff))
	}
	if r.Counts.Equivalent > 0 {
		attrs = append(attrs, "server_equivalent", r.Counts.Equivalent)
	}
	if r.Counts.GeneratedOnce > 0 {
		attrs = append(attrs, "generated_once", r.Counts.GeneratedOnce)
	}
	if len(r.HooksWaiting) > 0 {
		attrs = append(attrs, "hooks_waiting", failure.JoinList(r.HooksWaiting))
	}
	if len(r.Skipped) > 0 {
		skipped := make([]string, len(r.Skipped))
		for i, s := range r.Skipped {
			skipped[i] = s.String()
		}
		attrs = append(attrs, "skipped", failure.JoinList(skipped))
	}
	if len(r.Deferred) > 0 {
		deferred := make([]string, len(r.Deferred))
		for i, d := range r.Deferred {
			deferred[i] = d.String()
		}
		attrs = append(attrs, "prune_deferred", failure.JoinList(deferred))
	}
	if r.Counts.Orphaned > 0 {
		attrs = append(attrs, "orphaned", r.Counts.Orphaned)
	}
	if s := r.Suspension; s != nil {
		attrs = append(attrs, "suspended_until", s.Until.UTC().Format(time.RFC3339), "suspended_by", s.By)
	}
	if h := r.Health; h != nil {
		attrs = append(attrs, "health_status", string(h.Status))
		if bad := h.Unhealthy(); len(bad) > 0 {
			attrs = append(attrs, "unhealthy", failure.JoinList(UnhealthyList(bad)))
		}
	}
	if r.DryRun {
		attrs = append(attrs, "dry_run", true)
	}
	if f := r.Failure(); f != nil {
		attrs = append(attrs, "phase", string(f.Phase), "reason", string(f.Reason), "error", f.Err.Error())
		o.Log.ErrorContext(ctx, "tick", attrs...)
		return
	}
	o.Log.InfoContext(ctx, "tick", attrs...)
}
