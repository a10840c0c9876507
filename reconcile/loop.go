package reconcile

import (
	"context"
	"time"
)

// Run ticks at once and then every interval until ctx is cancelled. Ticks
// never overlap: a trigger that arrives during a tick is coalesced into one
// tick after it. Each tick is bounded by timeout. A failed tick is retried at
// the next interval, not sooner. When ctx is cancelled during a tick, the
// tick stops reading at once and stops writing after the current object;
// Run then returns.
func (r *Reconciler) Run(ctx context.Context, interval, timeout time.Duration, done func(*Result)) {
	trigger := make(chan struct{}, 1)
	fire := func() {
		select {
		case trigger <- struct{}{}:
		default: // a tick is already pending
		}
	}
	fire()
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				fire()
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-trigger:
		}
		if ctx.Err() != nil {
			// Both were ready and select picked the trigger.
			return
		}
		tctx, cancel := context.WithTimeoutCause(ctx, timeout, errTickTimeout)
		res := r.Tick(tctx)
		cancel()
		if done != nil {
			done(res)
		}
	}
}
