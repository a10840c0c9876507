package reconcile

import (
	"context"
	"testing"
)

// TestAsidePhaseDoesNotFailTheTick: a phase run aside (health) that panics
// is recorded as failed (reason other: counted, spanned, logged) but is not
// the tick's failure; the same panic in any other phase is.
func TestAsidePhaseDoesNotFailTheTick(t *testing.T) {
	boom := func(context.Context, *State) error { panic("boom") }
	for _, aside := range []bool{true, false} {
		r := New(Config{}, nil, nil, nil)
		res := &Result{}
		if r.runPhase(context.Background(), phase{p: PhaseHealth, fn: boom, aside: aside}, &State{}, res) {
			t.Fatalf("aside=%v: a panicking phase succeeded", aside)
		}
		if len(res.Phases) != 1 || res.Phases[0].Err == nil || res.Phases[0].Err.Reason != ReasonOther {
			t.Fatalf("aside=%v: phase results %+v, want one failed with reason other", aside, res.Phases)
		}
		if failed := res.Failure() != nil; failed == aside {
			t.Errorf("aside=%v: tick failure %v", aside, res.Failure())
		}
	}
}
