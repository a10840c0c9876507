package failure

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"

	"recond.dev/recond/internal/reason"
	"recond.dev/recond/internal/transient"
	"recond.dev/recond/reconcile/source"
	"recond.dev/recond/reconcile/writerule"
)

// Reason is the closed set of causes a failed phase is classified into.
type Reason = reason.Reason

// ErrTickTimeout is the cause a tick's context carries when --tick-timeout
// ran out, so a timeout is told apart from other cancellations.
var ErrTickTimeout = errors.New("tick timeout exceeded")

// Own classifies the engine's errors that this package does not know (a
// hook's, an immutable field's), with classify for what they wrap; "" for
// any other error.
type Own func(err error, classify func(error) Reason) Reason

// Classify maps an error to the closed set of reasons. It is called once, by
// the phase wrapper, on the error a phase returned. own (may be nil) is
// asked after a RejectedError, before the rules below.
func Classify(err error, own Own) Reason {
	var (
		inv     *invalidError
		owner   *OwnershipError
		man     *source.ManifestError
		sig     *source.SignatureError
		status  apierrors.APIStatus
		src     *source.Error
		noKind  *meta.NoKindMatchError
		refusal *writerule.Refusal
	)
	classify := func(err error) Reason { return Classify(err, own) }
	var rej *RejectedError
	if errors.As(err, &rej) && len(rej.Errs) > 0 && !errors.Is(err, ErrTickTimeout) && !errors.Is(err, context.DeadlineExceeded) {
		// Every refused object is named; the first one's reason is the
		// phase's, whatever the others'.
		return classify(rej.Errs[0])
	}
	if err != nil && own != nil {
		if r := own(err, classify); r != "" {
			return r
		}
	}
	switch {
	case err == nil:
		return ""
	case errors.As(err, &refusal):
		// The write gate refused it: the repository asked for a write
		// recond never makes, or the object is another instance's.
		return Reason(refusal.Reason)
	case errors.As(err, &inv), errors.As(err, &man):
		return reason.Invalid
	case errors.As(err, &sig):
		// A revision not signed by a trusted key is refused, like a request
		// the API server forbids.
		return reason.Forbidden
	case errors.As(err, &owner), errors.Is(err, ErrNotWriter):
		// Another recond owns the object, or another process of this
		// instance holds its Lease.
		return reason.Conflict
	case errors.Is(err, ErrTickTimeout), errors.Is(err, context.DeadlineExceeded), errors.Is(err, ErrAbandoned),
		// client-go's rate limiter refuses a wait that would pass the
		// deadline, before the deadline, with an error of its own.
		strings.Contains(err.Error(), "would exceed context deadline"):
		return reason.Timeout
	case errors.Is(err, context.Canceled):
		// The loop was stopped (SIGTERM) while the phase was waiting.
		return reason.Other
	case errors.As(err, &src):
		// The source said why, where it failed (its one list of go-git,
		// transport and network errors).
		return Reason(src.Reason)
	case errors.Is(err, os.ErrNotExist), errors.As(err, &noKind):
		return reason.NotFound
	case errors.As(err, &status):
		return classifyAPI(err)
	case transient.Reason(err) != "":
		// The network or the machine (a full disk, no file descriptor
		// left): it passes without a change to Git or the cluster.
		return Reason(transient.Reason(err))
	}
	return reason.Other
}

func classifyAPI(err error) Reason {
	switch {
	case apierrors.IsUnauthorized(err):
		return reason.Auth
	case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "while custom resource definition is terminating"):
		// The kind is going away (its CRD was deleted): the API server
		// refuses creates until it is gone, then knows the kind no more.
		return reason.NotFound
	case apierrors.IsForbidden(err):
		return reason.Forbidden
	case apierrors.IsNotFound(err), apierrors.IsGone(err):
		return reason.NotFound
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsUnsupportedMediaType(err),
		apierrors.IsRequestEntityTooLargeError(err), apierrors.IsMethodNotSupported(err):
		return reason.Invalid
	case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err):
		return reason.Conflict
	case apierrors.IsInternalError(err) && strings.Contains(err.Error(), "illegal base64 data"):
		// The API server answers a Secret whose data is not base64 with a
		// 500, though the manifest is at fault (apply checks first:
		// secretData).
		return reason.Invalid
	case apierrors.IsTimeout(err), apierrors.IsServerTimeout(err):
		return reason.Timeout
	case apierrors.IsServiceUnavailable(err), apierrors.IsTooManyRequests(err), apierrors.IsInternalError(err),
		apierrors.IsUnexpectedServerError(err):
		return reason.Unavailable
	}
	return reason.Other
}

// Refused reports whether err is the API server refusing one object: a 4xx
// answer about the object itself (invalid, forbidden by admission, RBAC or
// a quota, a conflict, too large), which the next object of a wave may not
// meet. An unreachable or overloaded server, a timeout, throttling or
// refused credentials are not: they would fail every object after it.
func Refused(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	switch code := status.Status().Code; code {
	case 401, 408, 429:
		return false
	default:
		return code >= 400 && code < 500
	}
}

// RejectedError is a wave's failed objects: every object the validating
// dry runs (or the writes) were refused for, not only the first. Its text
// names each of them (at most 10, then how many more); it unwraps to each
// object's error, in write order, so that Classify reads the first one's
// reason.
type RejectedError struct {
	// What says what stopped and what was written: "validate before
	// writing (nothing written)".
	What string
	Errs []error
}

func (e *RejectedError) Error() string {
	const most = 10
	msgs := make([]string, 0, min(len(e.Errs), most))
	for i, err := range e.Errs {
		if i == most {
			break
		}
		msgs = append(msgs, err.Error())
	}
	s := e.What + ": "
	if len(e.Errs) > 1 {
		s += fmt.Sprintf("%d objects refused: ", len(e.Errs))
	}
	s += strings.Join(msgs, "; ")
	if len(e.Errs) > most {
		s += fmt.Sprintf("; and %d more", len(e.Errs)-most)
	}
	return s
}

// Unwrap returns each object's error.
func (e *RejectedError) Unwrap() []error { return e.Errs }

// Rejected is the RejectedError of a wave whose calls failed with errs, in
// write order: every object named when each was refused for itself (by
// the server, or invalid before it was sent); else only the first failure
// that was not a refusal, the cause (the server unavailable, a timeout:
// the objects in flight with it failed alike, and naming them all would
// only repeat it).
func Rejected(what string, errs []error) *RejectedError {
	var inv *invalidError
	var ref *writerule.Refusal
	for _, err := range errs {
		if !Refused(err) && !errors.As(err, &inv) && !errors.As(err, &ref) {
			return &RejectedError{What: what, Errs: []error{err}}
		}
	}
	return &RejectedError{What: what, Errs: errs}
}
