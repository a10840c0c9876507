package reconcile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"

	"recond.dev/recond/internal/transient"
	"recond.dev/recond/reconcile/source"
	"recond.dev/recond/reconcile/writerule"
)

// errTickTimeout is the cause a tick's context carries when --tick-timeout
// ran out, so a timeout is told apart from other cancellations.
var errTickTimeout = errors.New("tick timeout exceeded")

// Classify maps an error to the closed set of reasons. It is called once, by
// the phase wrapper, on the error a phase returned.
func Classify(err error) Reason {
	var (
		inv     *invalidError
		own     *OwnershipError
		man     *source.ManifestError
		sig     *source.SignatureError
		status  apierrors.APIStatus
		src     *source.Error
		noKind  *meta.NoKindMatchError
		hook    *HookError
		immut   *ImmutableError
		refusal *writerule.Refusal
	)
	var rej *RejectedError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &rej) && len(rej.Errs) > 0 && !errors.Is(err, errTickTimeout) && !errors.Is(err, context.DeadlineExceeded):
		// Every refused object is named; the first one's reason is the
		// phase's, whatever the others'.
		return Classify(rej.Errs[0])
	case errors.As(err, &hook):
		// A hook that failed is reason hook; a request about one that
		// failed (forbidden, a timeout) keeps its own reason.
		var failed *hookFailure
		if errors.As(hook.Err, &failed) {
			return ReasonHook
		}
		return Classify(hook.Err)
	case errors.As(err, &immut):
		return ReasonImmutable
	case errors.As(err, &refusal):
		// The write gate refused it: the repository asked for a write
		// recond never makes, or the object is another instance's.
		return Reason(refusal.Reason)
	case errors.As(err, &inv), errors.As(err, &man):
		return ReasonInvalid
	case errors.As(err, &sig):
		// A revision not signed by a trusted key is refused, like a request
		// the API server forbids.
		return ReasonForbidden
	case errors.As(err, &own), errors.Is(err, errNotWriter):
		// Another recond owns the object, or another process of this
		// instance holds its Lease.
		return ReasonConflict
	case errors.Is(err, errTickTimeout), errors.Is(err, context.DeadlineExceeded), errors.Is(err, errAbandoned),
		// client-go's rate limiter refuses a wait that would pass the
		// deadline, before the deadline, with an error of its own.
		strings.Contains(err.Error(), "would exceed context deadline"):
		return ReasonTimeout
	case errors.Is(err, context.Canceled):
		// The loop was stopped (SIGTERM) while the phase was waiting.
		return ReasonOther
	case errors.As(err, &src):
		// The source said why, where it failed (its one list of go-git,
		// transport and network errors).
		return Reason(src.Reason)
	case errors.Is(err, os.ErrNotExist), errors.As(err, &noKind):
		return ReasonNotFound
	case errors.As(err, &status):
		return classifyAPI(err)
	case transient.Reason(err) != "":
		// The network or the machine (a full disk, no file descriptor
		// left): it passes without a change to Git or the cluster.
		return Reason(transient.Reason(err))
	}
	return ReasonOther
}

func classifyAPI(err error) Reason {
	switch {
	case apierrors.IsUnauthorized(err):
		return ReasonAuth
	case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "while custom resource definition is terminating"):
		// The kind is going away (its CRD was deleted): the API server
		// refuses creates until it is gone, then knows the kind no more.
		return ReasonNotFound
	case apierrors.IsForbidden(err):
		return ReasonForbidden
	case apierrors.IsNotFound(err), apierrors.IsGone(err):
		return ReasonNotFound
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsUnsupportedMediaType(err),
		apierrors.IsRequestEntityTooLargeError(err), apierrors.IsMethodNotSupported(err):
		return ReasonInvalid
	case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err):
		return ReasonConflict
	case apierrors.IsInternalError(err) && strings.Contains(err.Error(), "illegal base64 data"):
		// The API server answers a Secret whose data is not base64 with a
		// 500, though the manifest is at fault (apply checks first:
		// secretData).
		return ReasonInvalid
	case apierrors.IsTimeout(err), apierrors.IsServerTimeout(err):
		return ReasonTimeout
	case apierrors.IsServiceUnavailable(err), apierrors.IsTooManyRequests(err), apierrors.IsInternalError(err),
		apierrors.IsUnexpectedServerError(err):
		return ReasonUnavailable
	}
	return ReasonOther
}

// refused reports whether err is the API server refusing one object: a 4xx
// answer about the object itself (invalid, forbidden by admission, RBAC or
// a quota, a conflict, too large), which the next object of a wave may not
// meet. An unreachable or overloaded server, a timeout, throttling or
// refused credentials are not: they would fail every object after it.
func refused(err error) bool {
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

// rejected is the RejectedError of a wave whose calls failed with errs, in
// write order: every object named when each was refused for itself (by
// the server, or invalid before it was sent); else only the first failure
// that was not a refusal, the cause (the server unavailable, a timeout:
// the objects in flight with it failed alike, and naming them all would
// only repeat it).
func rejected(what string, errs []error) *RejectedError {
	var inv *invalidError
	var ref *writerule.Refusal
	for _, err := range errs {
		if !refused(err) && !errors.As(err, &inv) && !errors.As(err, &ref) {
			return &RejectedError{What: what, Errs: []error{err}}
		}
	}
	return &RejectedError{What: what, Errs: errs}
}
