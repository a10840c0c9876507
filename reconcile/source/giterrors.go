package source

import (
	"errors"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
)

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
