package reconcile

import (
	"errors"

	"recond.dev/recond/reconcile/failure"
)

// The engine's errors and their classification are reconcile/failure's;
// these are the names the engine and its callers use.

// Classify maps an error to the closed set of reasons (failure.Classify,
// with the engine's own errors: a hook's, an immutable field's). It is
// called once, by the phase wrapper, on the error a phase returned.
func Classify(err error) Reason { return failure.Classify(err, ownReason) }

// ownReason is the reason of a hook's error (reason hook when the hook
// failed; a request about one keeps its own) and of an immutable field's.
func ownReason(err error, classify func(error) Reason) Reason {
	var hook *HookError
	var immut *ImmutableError
	switch {
	case errors.As(err, &hook):
		var failed *hookFailure
		if errors.As(hook.Err, &failed) {
			return ReasonHook
		}
		return classify(hook.Err)
	case errors.As(err, &immut):
		return ReasonImmutable
	}
	return ""
}

// Invalid marks err as caused by invalid input (ReasonInvalid).
func Invalid(err error) error { return failure.Invalid(err) }

// Invalidf is fmt.Errorf marked Invalid.
func Invalidf(format string, args ...any) error { return failure.Invalidf(format, args...) }

// PanicError is the error a recovered panic with value v becomes.
func PanicError(v any) error { return failure.PanicError(v) }

// IsPanic reports whether err is, or wraps, a recovered panic.
func IsPanic(err error) bool { return failure.IsPanic(err) }

type (
	// OwnershipError reports live objects that another recond instance
	// owns (failure.OwnershipError).
	OwnershipError = failure.OwnershipError
	// RejectedError is a wave's failed objects (failure.RejectedError).
	RejectedError = failure.RejectedError
)

var (
	errTickTimeout = failure.ErrTickTimeout
	errAbandoned   = failure.ErrAbandoned
	errPanic       = failure.ErrPanic
	errPhasePanic  = failure.ErrPhasePanic
	errStopped     = failure.ErrStopped
	errNotWriter   = failure.ErrNotWriter
	refused        = failure.Refused
	rejected       = failure.Rejected
	joinList       = failure.JoinList
)
