package failure

import (
	"errors"
	"fmt"
)

// invalidError marks an error whose cause is the input (manifests, flags), so
// that Classify reports reason invalid whatever it wraps.
type invalidError struct{ err error }

func (e *invalidError) Error() string { return e.err.Error() }
func (e *invalidError) Unwrap() error { return e.err }

// Invalid marks err as caused by invalid input (reason invalid).
func Invalid(err error) error {
	if err == nil {
		return nil
	}
	return &invalidError{err: err}
}

// Invalidf is fmt.Errorf marked Invalid.
func Invalidf(format string, args ...any) error { return Invalid(fmt.Errorf(format, args...)) }

// OwnershipError reports live objects that another recond instance owns
// (label recond.dev/instance) and that Git names: they are never adopted,
// written or pruned. Classify reports it as reason conflict.
type OwnershipError struct {
	// Objects are "Kind/name (instance <owner>)", sorted.
	Objects []string
}

func (e *OwnershipError) Error() string {
	return fmt.Sprintf("%d object(s) in Git belong to another recond instance; refusing to adopt them (remove them from Git, or from the other instance's): %s",
		len(e.Objects), JoinList(e.Objects))
}

// ErrAbandoned is the error of a phase that did not return after its
// tick's deadline: the tick went on without it (reconcile.AbandonAfter).
var ErrAbandoned = errors.New("abandoned")

// ErrPanic marks the error a recovered panic became (a phase's, or one
// object's write in apply): recond_panics_total counts them.
var ErrPanic = errors.New("panic")

// PanicError is the error a recovered panic with value v becomes.
func PanicError(v any) error { return fmt.Errorf("%w: %v", ErrPanic, v) }

// ErrPhasePanic is a phase's own panic (not one object's write in apply,
// which apply reports as its error): PhaseResult.Panicked.
var ErrPhasePanic = fmt.Errorf("%w", ErrPanic)

// IsPanic reports whether err is, or wraps, a recovered panic.
func IsPanic(err error) bool { return errors.Is(err, ErrPanic) }

// ErrStopped is returned by the apply phase when the loop was asked to stop
// between two objects.
var ErrStopped = errors.New("stopped before the apply finished")

// ErrNotWriter marks a write refused because this process may not write
// for its instance now (Config.MayWrite): another process holds the Lease,
// or it is gone. Classify reports it as reason conflict.
var ErrNotWriter = errors.New("refused to write: this process does not hold the instance's Lease")

// JoinList joins at most 10 items and says how many more there are.
func JoinList(items []string) string {
	const most = 10
	if len(items) <= most {
		return fmt.Sprint(items)
	}
	return fmt.Sprintf("%v and %d more", items[:most], len(items)-most)
}
