package reconcile

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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"recond.dev/recond/reconcile/source"
)

func TestClassify(t *testing.T) {
	gr := schema.GroupResource{Group: "apps", Resource: "deployments"}
	refused := &url.Error{Op: "Get", URL: "https://git.example.com", Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
	cases := []struct {
		name string
		err  error
		want Reason
	}{
		{"nil", nil, ""},
		{"invalid input", Invalidf("x.yaml: ConfigMap/a: bad"), ReasonInvalid},
		{"manifest", fmt.Errorf("render: %w", &source.ManifestError{File: "a.yaml", Err: errors.New("yaml")}), ReasonInvalid},
		{"forbidden", fmt.Errorf("list: %w", apierrors.NewForbidden(gr, "", errors.New("rbac"))), ReasonForbidden},
		{"unsigned commit", fmt.Errorf("fetch file:///r: %w", &source.SignatureError{Commit: "1a2b3c4d5e6f", Err: source.ErrUnsigned}), ReasonForbidden},
		// The cause matters less than the refusal: an unreadable signature
		// whose parse error looks like a missing object is still forbidden.
		{"untrusted key", fmt.Errorf("fetch: %w", &source.SignatureError{Commit: "1a2b3c4d5e6f", KeyID: "0123456789ABCDEF", Err: fmt.Errorf("%w", plumbing.ErrObjectNotFound)}), ReasonForbidden},
		{"unauthorized", apierrors.NewUnauthorized("token expired"), ReasonAuth},
		{"not found", apierrors.NewNotFound(gr, "web"), ReasonNotFound},
		{"conflict", apierrors.NewConflict(gr, "web", errors.New("rv")), ReasonConflict},
		{"api invalid", apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, "web", nil), ReasonInvalid},
		{"bad request", apierrors.NewBadRequest("no"), ReasonInvalid},
		{"server timeout", apierrors.NewServerTimeout(gr, "list", 1), ReasonTimeout},
		{"unavailable", apierrors.NewServiceUnavailable("etcd"), ReasonUnavailable},
		{"internal", apierrors.NewInternalError(errors.New("boom")), ReasonUnavailable},
		{"git auth", fmt.Errorf("fetch: %w", transport.ErrAuthenticationRequired), ReasonAuth},
		{"git authz", fmt.Errorf("fetch: %w", transport.ErrAuthorizationFailed), ReasonAuth},
		{"host key", fmt.Errorf("fetch: %w", &knownhosts.KeyError{}), ReasonAuth},
		{"ssh key refused", errors.New("ssh: handshake failed: ssh: unable to authenticate, attempted methods [none publickey]"), ReasonAuth},
		{"git repo", fmt.Errorf("fetch: %w", transport.ErrRepositoryNotFound), ReasonNotFound},
		{"git ref", fmt.Errorf("fetch: %w", plumbing.ErrReferenceNotFound), ReasonNotFound},
		{"connection refused", fmt.Errorf("fetch: %w", refused), ReasonUnavailable},
		{"git server 503", fmt.Errorf("fetch: %w", gitHTTPErr(503)), ReasonUnavailable},
		{"git server 504", fmt.Errorf("fetch: %w", gitHTTPErr(504)), ReasonTimeout},
		{"git server 418", fmt.Errorf("fetch: %w", gitHTTPErr(418)), ReasonOther},
		{"deadline", fmt.Errorf("list: %w", context.DeadlineExceeded), ReasonTimeout},
		{"rate limiter", fmt.Errorf("list: client rate limiter Wait returned an error: %w", errors.New("rate: Wait(n=1) would exceed context deadline")), ReasonTimeout},
		{"tick timeout", fmt.Errorf("%w: %w", errTickTimeout, context.Canceled), ReasonTimeout},
		{"stopped", fmt.Errorf("%w: %w", errStopped, context.Canceled), ReasonOther},
		{"disk full", fmt.Errorf("write pack: %w", &os.PathError{Op: "write", Path: "/cache/x", Err: syscall.ENOSPC}), ReasonUnavailable},
		{"no file descriptor", fmt.Errorf("open: %w", syscall.EMFILE), ReasonUnavailable},
		{"stopped by the tick timeout", fmt.Errorf("%w: %w", errStopped, errTickTimeout), ReasonTimeout},
		{"cancelled request", &url.Error{Op: "Get", URL: "https://api", Err: context.Canceled}, ReasonOther},
		{"anything else", errors.New("boom"), ReasonOther},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Classify(tc.err); got != tc.want {
				t.Errorf("Classify(%v) = %q, want %q", tc.err, got, tc.want)
			}
		})
	}
}

func gitHTTPErr(code int) error {
	return &githttp.Err{Response: &http.Response{StatusCode: code, Status: http.StatusText(code), Request: &http.Request{URL: &url.URL{Scheme: "https", Host: "git.example.com"}}}}
}
