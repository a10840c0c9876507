package reconcile

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"

	"recond.dev/recond/reconcile/loop"
)

// The loop that schedules ticks is reconcile/loop's; these are the names
// the engine's callers use.

// Trigger names what asked for a tick (loop.Trigger).
type Trigger = loop.Trigger

// Every trigger of a tick.
const (
	TriggerInterval = loop.TriggerInterval
	TriggerWatch    = loop.TriggerWatch
	TriggerManual   = loop.TriggerManual
	TriggerWebhook  = loop.TriggerWebhook
	TriggerHook     = loop.TriggerHook
)

// Triggers lists every Trigger.
var Triggers = loop.Triggers

// Progress is where the loop is (loop.Progress).
type Progress = loop.Progress

// Links returns the request spans the tick whose ctx this is serves.
func Links(ctx context.Context) []trace.SpanContext { return loop.Links(ctx) }

// Run ticks at once and then every interval until ctx is cancelled, and
// whenever Trigger is called (loop.Loop.Run); done, when set, is handed
// each tick's Result. Ticks never overlap: triggers that arrive during a
// tick are coalesced into one tick after it. Each tick is bounded by
// timeout. A failed tick is retried at the next interval, not sooner.
// When ctx is cancelled during a tick, the tick stops reading at once and
// stops writing after the current object; Run then returns.
//
// A phase that does not return within AbandonAfter of the tick's deadline is
// abandoned: the tick fails (reason timeout) and the next one can start.
// While loop.MaxStrays abandoned phases are still running, no tick starts
// (so /healthz, which watches Progress, fails and the process is
// restarted).
func (r *Reconciler) Run(ctx context.Context, interval, timeout time.Duration, done func(*Result)) {
	r.Loop.Run(ctx, interval, timeout, func(ctx context.Context, why Trigger) {
		res := r.TickFor(ctx, why)
		if done != nil {
			done(res)
		}
	})
}
