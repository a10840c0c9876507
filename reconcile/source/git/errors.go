package git

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
)

// WithReason returns err as a *reason.Error with its reason (err itself
// when it already is one, or when ReasonOf has nothing to say: a stop, a
// manifest's fault, anything unknown).
func WithReason(err error) error {
	var e *reason.Error
	if err == nil || errors.As(err, &e) {
		return err
	}
	if r := ReasonOf(err); r != "" {
		return &reason.Error{Reason: r, Err: err}
	}
	return err
}

// ReasonOf is the one list of what go-git, its transports, the network and
// the machine fail with, and why. go-git hides a transport's failure inside
// errors without Unwrap: pass its errors through wrapGoGit first.
func ReasonOf(err error) reason.Reason {
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
		return reason.Auth
	case strings.Contains(err.Error(), "http redirect: "):
		// go-git refused a redirect (from https to http, away from the
		// repository, on a request after the first): the server sends
		// recond where it will not go, which no retry changes. go-git has
		// no typed error for it.
		return reason.Forbidden
	case errors.Is(err, transport.ErrRepositoryNotFound), errors.Is(err, git.ErrRepositoryNotExists),
		errors.Is(err, plumbing.ErrReferenceNotFound), errors.Is(err, plumbing.ErrObjectNotFound):
		return reason.NotFound
	case errors.As(err, &httpErr) && httpErr.Response != nil:
		switch code := httpErr.Response.StatusCode; {
		case code == 408 || code == 504:
			return reason.Timeout
		case code == 429 || code >= 500:
			return reason.Unavailable
		}
		return reason.Other
	}
	return reason.Reason(transient.Reason(err))
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
