package reconcile

import (
	"context"
	"sync"
	"time"
)

// Trigger names what asked for a tick. The values are a contract: the tick
// log line, the root span and recond_tick_triggers_total{source} use them.
type Trigger string

// Every trigger of a tick.
const (
	// TriggerInterval: the loop's start, or --interval elapsed.
	TriggerInterval Trigger = "interval"
	// TriggerWatch: a watched object recond owns was changed or deleted by
	// someone else.
	TriggerWatch Trigger = "watch"
	// TriggerManual: a one-off tick (recond sync, recond diff).
	TriggerManual Trigger = "manual"
)

// Triggers lists every Trigger, so that labelled series can be
// pre-initialised.
var Triggers = []Trigger{TriggerInterval, TriggerWatch, TriggerManual}

// Trigger asks the running loop for a tick as soon as the current one (if
// any) has ended. It never blocks: requests that arrive while one is
// pending are coalesced into it (the first one's source is kept). Safe for
// concurrent use, also before Run starts (the request then waits for it).
func (r *Reconciler) Trigger(t Trigger) {
	select {
	case r.triggers <- t:
	default: // a tick is already pending
	}
}

// TriggerAfter is Trigger after delay, debounced: calls made while one is
// waiting join it, so a burst of events costs one tick. The delay lets the
// burst's last event arrive (a rollout touches an object several times).
func (r *Reconciler) TriggerAfter(t Trigger, delay time.Duration) {
	r.debounce.mu.Lock()
	defer r.debounce.mu.Unlock()
	if r.debounce.timer != nil {
		return
	}
	r.debounce.timer = time.AfterFunc(delay, func() {
		r.debounce.mu.Lock()
		r.debounce.timer = nil
		r.debounce.mu.Unlock()
		r.Trigger(t)
	})
}

// debouncer holds the one pending TriggerAfter.
type debouncer struct {
	mu    sync.Mutex
	timer *time.Timer
}

// Run ticks at once and then every interval until ctx is cancelled, and
// whenever Trigger is called. Ticks never overlap: triggers that arrive
// during a tick are coalesced into one tick after it. Each tick is bounded
// by timeout. A failed tick is retried at the next interval, not sooner.
// When ctx is cancelled during a tick, the tick stops reading at once and
// stops writing after the current object; Run then returns.
func (r *Reconciler) Run(ctx context.Context, interval, timeout time.Duration, done func(*Result)) {
	loop{triggers: r.triggers, tick: r.TickFor}.run(ctx, interval, timeout, done)
}

// loop is Run without the Reconciler: a coalescing one-slot trigger channel,
// a ticker that writes into it, and one tick at a time.
type loop struct {
	triggers chan Trigger
	tick     func(context.Context, Trigger) *Result
}

func (l loop) run(ctx context.Context, interval, timeout time.Duration, done func(*Result)) {
	fire := func(t Trigger) {
		select {
		case l.triggers <- t:
		default: // a tick is already pending
		}
	}
	fire(TriggerInterval)
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				fire(TriggerInterval)
			}
		}
	}()
	for {
		var why Trigger
		select {
		case <-ctx.Done():
			return
		case why = <-l.triggers:
		}
		if ctx.Err() != nil {
			// Both were ready and select picked the trigger.
			return
		}
		tctx, cancel := context.WithTimeoutCause(ctx, timeout, errTickTimeout)
		res := l.tick(tctx, why)
		cancel()
		if done != nil {
			done(res)
		}
	}
}
