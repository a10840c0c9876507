package main

import (
	"context"
	"math/rand/v2"
	"time"
)

// jitterFraction draws the fraction of --start-jitter a process waits (a
// uniform draw in [0, 1)); tests replace it.
var jitterFraction = rand.Float64

// startDelay is how long `recond run` waits after starting, before it
// campaigns for the Lease and ticks: the fraction frac (a uniform draw in
// [0, 1)) of --start-jitter. Processes started together (a fleet's
// rollout, a node's restart) so spread their first syncs over the jitter
// instead of sending them to the API server in the same second. The
// delay is always less than jitter, and 0 without one; a frac outside
// [0, 1) is held inside it.
func startDelay(jitter time.Duration, frac float64) time.Duration {
	if jitter <= 0 || !(frac > 0) { // !(> 0) also holds NaN at 0
		return 0
	}
	d := time.Duration(frac * float64(jitter))
	if d >= jitter {
		d = jitter - 1
	}
	return d
}

// waitToStart waits d, or until ctx is done: false then.
func waitToStart(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
