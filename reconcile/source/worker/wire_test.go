package worker

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"recond.dev/recond/internal/reason"
	"recond.dev/recond/internal/transient"
	"recond.dev/recond/reconcile/source/git"
)

// TestSetupFailureReasons: what the worker says of its own setup crosses
// the pipe with its reason, as a worker's failure (a *SetupError), and
// with none when its cause has none.
func TestSetupFailureReasons(t *testing.T) {
	for _, c := range []struct {
		name  string
		cause error
		want  reason.Reason
	}{
		{"a limit refused", fmt.Errorf("setrlimit: %w", syscall.EPERM), reason.Forbidden},
		{"no process left", fmt.Errorf("fork: %w", syscall.EAGAIN), reason.Unavailable},
		{"anything else", errors.New("no VmSize in /proc/self/status"), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := toWire(NewSetupError(fmt.Errorf("render worker: %w", c.cause)), Classify{}).err()
			var we *SetupError
			if !errors.As(got, &we) {
				t.Fatalf("%v (%T) is not a *SetupError", got, got)
			}
			var se *reason.Error
			switch {
			case c.want == "" && errors.As(got, &se):
				t.Errorf("%v has reason %s; want none", got, se.Reason)
			case c.want != "" && (!errors.As(got, &se) || se.Reason != c.want):
				t.Errorf("%v: want reason %s", got, c.want)
			}
			if c.want == "" && transient.Reason(got) != "" {
				t.Errorf("%v reads as transient", got)
			}
		})
	}
}

// TestReasonCrossesThePipe: a render error's reason survives the render
// worker's pipe.
func TestReasonCrossesThePipe(t *testing.T) {
	err := toWire(fmt.Errorf("read: %w", plumbing.ErrObjectNotFound), Classify{Reason: git.WithReason, ReadFault: git.ReadFault}).err()
	var se *reason.Error
	if !errors.As(err, &se) || se.Reason != reason.NotFound {
		t.Fatalf("after the pipe: %#v, want a *reason.Error with reason %q", err, reason.NotFound)
	}
}
