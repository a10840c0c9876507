package git

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

	"recond.dev/recond/internal/reason"
	"recond.dev/recond/reconcile/source/manifest"
)

// TestReasonOf is the one list of what go-git, its transports, the
// network and the machine fail with, and the reason each carries out of
// the source (as an *Error, through errors.As).
func TestReasonOf(t *testing.T) {
	refused := &url.Error{Op: "Get", URL: "https://git.example.com", Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
	for _, tc := range []struct {
		name string
		err  error
		want reason.Reason
	}{
		{"git auth", fmt.Errorf("fetch: %w", transport.ErrAuthenticationRequired), reason.Auth},
		{"git authz", fmt.Errorf("fetch: %w", transport.ErrAuthorizationFailed), reason.Auth},
		{"host key", fmt.Errorf("fetch: %w", &knownhosts.KeyError{}), reason.Auth},
		{"ssh key refused", errors.New("ssh: handshake failed: ssh: unable to authenticate, attempted methods [none publickey]"), reason.Auth},
		{"git repo", fmt.Errorf("fetch: %w", transport.ErrRepositoryNotFound), reason.NotFound},
		{"git ref", fmt.Errorf("fetch: %w", plumbing.ErrReferenceNotFound), reason.NotFound},
		{"object", fmt.Errorf("read: %w", plumbing.ErrObjectNotFound), reason.NotFound},
		{"connection refused", fmt.Errorf("fetch: %w", refused), reason.Unavailable},
		{"git server 503", wrapGoGit(plumbing.NewUnexpectedError(gitHTTPErr(503))), reason.Unavailable},
		{"git server 429", gitHTTPErr(429), reason.Unavailable},
		{"git server 504", fmt.Errorf("fetch: %w", gitHTTPErr(504)), reason.Timeout},
		{"git server 418", fmt.Errorf("fetch: %w", gitHTTPErr(418)), reason.Other},
		{"disk full", &os.PathError{Op: "write", Path: "/cache/x", Err: syscall.ENOSPC}, reason.Unavailable},
		{"stopped: the caller knows why", context.Canceled, ""},
		{"a manifest's fault: not the source's to say", &manifest.ManifestError{File: "a.yaml", Err: errors.New("yaml")}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ReasonOf(tc.err); got != tc.want {
				t.Errorf("ReasonOf(%v) = %q, want %q", tc.err, got, tc.want)
			}
			var se *reason.Error
			got := errors.As(WithReason(tc.err), &se)
			if got != (tc.want != "") || got && se.Reason != tc.want {
				t.Errorf("WithReason(%v) = %#v, want a *reason.Error with reason %q", tc.err, WithReason(tc.err), tc.want)
			}
		})
	}
}

func gitHTTPErr(code int) error {
	return &githttp.Err{Response: &http.Response{StatusCode: code, Status: http.StatusText(code), Request: &http.Request{URL: &url.URL{Scheme: "https", Host: "git.example.com"}}}}
}
