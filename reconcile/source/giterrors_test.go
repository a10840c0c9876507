package source

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"syscall"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"golang.org/x/crypto/ssh/knownhosts"
)

// TestReasonOf is the one list of what go-git, its transports, the
// network and the machine fail with, and the reason each carries out of
// the source (as an *Error, through errors.As).
func TestReasonOf(t *testing.T) {
	refused := &url.Error{Op: "Get", URL: "https://git.example.com", Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
	for _, tc := range []struct {
		name string
		err  error
		want Reason
	}{
		{"git auth", fmt.Errorf("fetch: %w", transport.ErrAuthenticationRequired), ReasonAuth},
		{"git authz", fmt.Errorf("fetch: %w", transport.ErrAuthorizationFailed), ReasonAuth},
		{"host key", fmt.Errorf("fetch: %w", &knownhosts.KeyError{}), ReasonAuth},
		{"ssh key refused", errors.New("ssh: handshake failed: ssh: unable to authenticate, attempted methods [none publickey]"), ReasonAuth},
		{"git repo", fmt.Errorf("fetch: %w", transport.ErrRepositoryNotFound), ReasonNotFound},
		{"git ref", fmt.Errorf("fetch: %w", plumbing.ErrReferenceNotFound), ReasonNotFound},
		{"object", fmt.Errorf("read: %w", plumbing.ErrObjectNotFound), ReasonNotFound},
		{"connection refused", fmt.Errorf("fetch: %w", refused), ReasonUnavailable},
		{"git server 503", wrapGoGit(plumbing.NewUnexpectedError(gitHTTPErr(503))), ReasonUnavailable},
		{"git server 429", gitHTTPErr(429), ReasonUnavailable},
		{"git server 504", fmt.Errorf("fetch: %w", gitHTTPErr(504)), ReasonTimeout},
		{"git server 418", fmt.Errorf("fetch: %w", gitHTTPErr(418)), ReasonOther},
		{"disk full", &os.PathError{Op: "write", Path: "/cache/x", Err: syscall.ENOSPC}, ReasonUnavailable},
		{"stopped: the caller knows why", context.Canceled, ""},
		{"a manifest's fault: not the source's to say", &ManifestError{File: "a.yaml", Err: errors.New("yaml")}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := reasonOf(tc.err); got != tc.want {
				t.Errorf("reasonOf(%v) = %q, want %q", tc.err, got, tc.want)
			}
			var se *Error
			got := errors.As(withReason(tc.err), &se)
			if got != (tc.want != "") || got && se.Reason != tc.want {
				t.Errorf("withReason(%v) = %#v, want an *Error with reason %q", tc.err, withReason(tc.err), tc.want)
			}
		})
	}
}

// TestReasonCrossesThePipe: a render error's reason survives the render
// worker's pipe.
func TestReasonCrossesThePipe(t *testing.T) {
	err := toWire(fmt.Errorf("read: %w", plumbing.ErrObjectNotFound)).err()
	var se *Error
	if !errors.As(err, &se) || se.Reason != ReasonNotFound {
		t.Fatalf("after the pipe: %#v, want an *Error with reason %q", err, ReasonNotFound)
	}
}

func gitHTTPErr(code int) error {
	return &githttp.Err{Response: &http.Response{StatusCode: code, Status: http.StatusText(code), Request: &http.Request{URL: &url.URL{Scheme: "https", Host: "git.example.com"}}}}
}
