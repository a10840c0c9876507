package source

import (
	"errors"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"golang.org/x/crypto/ssh/knownhosts"

	"recond.dev/recond/internal/reason"
	"recond.dev/recond/internal/transient"
	"recond.dev/recond/reconcile/source/oci"
)

// Reason says why the source could not be read, in the words of the loop's
// closed set of reasons (reconcile.Reason has the same values).
type Reason = reason.Reason

// The reasons an *Error carries.
const (
	ReasonAuth        = reason.Auth
	ReasonNotFound    = reason.NotFound
	ReasonTimeout     = reason.Timeout
	ReasonUnavailable = reason.Unavailable
	ReasonOther       = reason.Other
	// ReasonInvalid: an artifact that recond refuses (oci.go).
	ReasonInvalid = reason.Invalid
	// ReasonForbidden: an artifact whose signature does not verify, a
	// redirect recond will not follow (https to http), a render worker
	// the platform refuses what it asks.
	ReasonForbidden = reason.Forbidden
)

// Error is a failure to read the source (Git, its transports, the disk)
// with its reason, decided once, where the failure is made: the loop's
// classifier asks for it with errors.As rather than knowing go-git's errors.
type Error = reason.Error

// withReason returns err as an *Error with its reason (err itself when it
// already is one, or when reasonOf has nothing to say: a stop, a manifest's
// fault, anything unknown).
func withReason(err error) error {
	var e *Error
	if err == nil || errors.As(err, &e) {
		return err
	}
	var oe *oci.Error
	if errors.As(err, &oe) {
		// The registry client decided it where it failed.
		return &Error{Reason: Reason(oe.Reason), Err: err}
	}
	if r := reasonOf(err); r != "" {
		return &Error{Reason: r, Err: err}
	}
	return err
}

// reasonOf is the one list of what go-git, its transports, the network and
// the machine fail with, and why. go-git hides a transport's failure inside
// errors without Unwrap: pass its errors through wrapGoGit first.
func reasonOf(err error) Reason {
	var (
		hostKey *knownhosts.KeyError
		httpErr *githttp.Err
	)
	switch {
	case err == nil:
		return ""
	case errors.Is(err, transport.ErrAuthenticationRequired), errors.Is(err, transport.ErrAuthorizationFailed),
		errors.Is(err, transport.ErrInvalidAuthMethod), errors.As(err, &hostKey),
		// x/crypto/ssh has no typed error for a refused client key.
		strings.Contains(err.Error(), "ssh: unable to authenticate"):
		return ReasonAuth
	case strings.Contains(err.Error(), "http redirect: "):
		// go-git refused a redirect (from https to http, away from the
		// repository, on a request after the first): the server sends
		// recond where it will not go, which no retry changes. go-git has
		// no typed error for it.
		return ReasonForbidden
	case errors.Is(err, transport.ErrRepositoryNotFound), errors.Is(err, git.ErrRepositoryNotExists),
		errors.Is(err, plumbing.ErrReferenceNotFound), errors.Is(err, plumbing.ErrObjectNotFound):
		return ReasonNotFound
	case errors.As(err, &httpErr) && httpErr.Response != nil:
		switch code := httpErr.Response.StatusCode; {
		case code == 408 || code == 504:
			return ReasonTimeout
		case code == 429 || code >= 500:
			return ReasonUnavailable
		}
		return ReasonOther
	}
	return Reason(transient.Reason(err))
}

// remoteError is a failure of the remote (or of the way to it) that the
// clone has no part in: it is never rebuilt for one.
type remoteError struct{ err error }

func (e *remoteError) Error() string { return e.err.Error() }
func (e *remoteError) Unwrap() error { return e.err }

// errCredentials marks a credentials file that cannot be read: not the
// clone's fault.
var errCredentials = errors.New("read credentials")

// goGitError presents an error from go-git: its message loses the newline
// or dangling ": " that go-git leaves when it quotes an HTTP response body,
// and the cause inside go-git's UnexpectedError and PermanentError (which
// have no Unwrap method) becomes reachable with errors.Is and errors.As.
type goGitError struct{ errs []error }

func (e *goGitError) Error() string   { return strings.TrimRight(e.errs[0].Error(), " :\r\n") }
func (e *goGitError) Unwrap() []error { return e.errs }

func wrapGoGit(err error) error {
	errs := []error{err}
	var ue *plumbing.UnexpectedError
	if errors.As(err, &ue) {
		errs = append(errs, ue.Err)
	}
	var pe *plumbing.PermanentError
	if errors.As(err, &pe) {
		errs = append(errs, pe.Err)
	}
	return &goGitError{errs}
}
