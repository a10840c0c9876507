package reconcile_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"recond.dev/recond/reconcile"
)

// A suspension is a second long at least: its end is written to the
// second, so a shorter one (1ns) answered suspended with an end already
// past. 0 stays --suspend-max (Suspend's "not given"); CheckSuspendFor,
// the callers' rule for a length they were given, refuses it too.
func TestSuspendLengthAtLeastASecond(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit("app", app())
	h.mustTick(reconcile.OutcomeApplied)
	for _, d := range []time.Duration{time.Nanosecond, 999 * time.Millisecond, -time.Second} {
		_, err := h.reconciler().Suspend(context.Background(), "alice", "x", d)
		if !errors.Is(err, reconcile.ErrSuspend) || !strings.Contains(err.Error(), "a duration of at least 1s") {
			t.Errorf("Suspend for %s: %v, want ErrSuspend saying \"a duration of at least 1s\"", d, err)
		}
		if reconcile.CheckSuspendFor(d) == nil {
			t.Errorf("CheckSuspendFor(%s) = nil", d)
		}
	}
	if err := reconcile.CheckSuspendFor(0); err == nil {
		t.Error("CheckSuspendFor(0) = nil: a length given as 0 would be --suspend-max")
	}
	if _, ok := h.inventoryAnnotations(t)[reconcile.AnnotationSuspendedUntil]; ok {
		t.Fatal("a refused suspension was written")
	}
	s, err := h.reconciler().Suspend(context.Background(), "alice", "x", time.Second)
	if err != nil || !s.Until.After(time.Now()) {
		t.Errorf("Suspend for 1s: %v, %v; want an end still to come", s, err)
	}
}
