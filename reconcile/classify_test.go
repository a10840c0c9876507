package reconcile

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
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
		{"a kind whose CRD is terminating", fmt.Errorf("apply Widget/w1: %w", apierrors.NewForbidden(schema.GroupResource{Group: "faults.recond.test", Resource: "widgets"}, "w1", errors.New("create not allowed while custom resource definition is terminating"))), ReasonNotFound},
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
		{"secret data not base64", fmt.Errorf("apply Secret/db: %w", apierrors.NewInternalError(errors.New("unable to convert unstructured object to /v1, Kind=Secret: error decoding from json: illegal base64 data at input byte 7"))), ReasonInvalid},
		{"every refused object", &RejectedError{What: "validate", Errs: []error{apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "a", nil), apierrors.NewForbidden(gr, "b", errors.New("quota"))}}, ReasonInvalid},
		{"the first refusal's reason, not another's", &RejectedError{What: "validate", Errs: []error{apierrors.NewForbidden(gr, "b", errors.New("quota")), &ImmutableError{Kind: "Deployment", Name: "web", Fields: []string{"spec.selector"}, Err: apierrors.NewInvalid(schema.GroupKind{Kind: "Deployment"}, "web", nil)}}}, ReasonForbidden},
		{"immutable", fmt.Errorf("validate: %w", &ImmutableError{Kind: "Deployment", Name: "web", Fields: []string{"spec.selector"}, Err: apierrors.NewInvalid(schema.GroupKind{Kind: "Deployment"}, "web", nil)}), ReasonImmutable},
		{"refused write after a stop", &RejectedError{What: "apply stopped", Errs: []error{apierrors.NewForbidden(gr, "b", errors.New("exceeded quota"))}}, ReasonForbidden},
		// The source's errors carry their reason (source.TestReasonOf
		// has the list of go-git's); the classifier reads it.
		{"source auth", fmt.Errorf("fetch: %w", &source.Error{Reason: source.ReasonAuth, Err: errors.New("authentication required")}), ReasonAuth},
		{"source not found", fmt.Errorf("fetch: %w", &source.Error{Reason: source.ReasonNotFound, Err: errors.New("reference not found")}), ReasonNotFound},
		{"source timeout", fmt.Errorf("fetch: %w", &source.Error{Reason: source.ReasonTimeout, Err: errors.New("504")}), ReasonTimeout},
		{"a manifest's fault beats the source's reason", &source.Error{Reason: source.ReasonNotFound, Err: &source.ManifestError{File: "a.yaml", Err: errors.New("x")}}, ReasonInvalid},
		{"missing file", fmt.Errorf("read token: %w", os.ErrNotExist), ReasonNotFound},
		{"connection refused", fmt.Errorf("fetch: %w", refused), ReasonUnavailable},
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

// refused tells a refusal of one object, after which the wave goes on,
// from a failure that would fail every object after it.
func TestRefused(t *testing.T) {
	gr := schema.GroupResource{Resource: "configmaps"}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"invalid", apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "a", nil), true},
		{"quota", fmt.Errorf("apply ConfigMap/a: %w", apierrors.NewForbidden(gr, "a", errors.New("exceeded quota"))), true},
		{"webhook denied", apierrors.NewBadRequest("admission webhook denied the request"), true},
		{"conflict", apierrors.NewConflict(gr, "a", errors.New("rv")), true},
		{"too large", apierrors.NewRequestEntityTooLargeError("limit"), true},
		{"unauthorized", apierrors.NewUnauthorized("expired"), false},
		{"throttled", apierrors.NewTooManyRequests("slow down", 1), false},
		{"timeout", apierrors.NewTimeoutError("slow", 1), false},
		{"internal", apierrors.NewInternalError(errors.New("boom")), false},
		{"unavailable", apierrors.NewServiceUnavailable("etcd"), false},
		{"connection refused", syscall.ECONNREFUSED, false},
		{"panic", PanicError("x"), false},
	} {
		if got := refused(tc.err); got != tc.want {
			t.Errorf("%s: refused(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// RejectedError names every refused object, at most 10, then how many
// more.
func TestRejectedErrorNamesEveryObject(t *testing.T) {
	var errs []error
	for i := range 12 {
		errs = append(errs, fmt.Errorf("apply ConfigMap/cm-%02d: refused", i))
	}
	for _, tc := range []struct {
		n    int
		want string
	}{
		{1, "validate: apply ConfigMap/cm-00: refused"},
		{3, "validate: 3 objects refused: apply ConfigMap/cm-00: refused; apply ConfigMap/cm-01: refused; apply ConfigMap/cm-02: refused"},
		{12, "; apply ConfigMap/cm-09: refused; and 2 more"},
	} {
		got := (&RejectedError{What: "validate", Errs: errs[:tc.n]}).Error()
		if !strings.HasSuffix(got, tc.want) && got != tc.want {
			t.Errorf("%d errors: %q, want %q", tc.n, got, tc.want)
		}
	}
}

// rejected names every refused object, or only the cause of a failure
// that is not a refusal.
func TestRejectedNamesRefusalsOrTheCause(t *testing.T) {
	gr := schema.GroupResource{Resource: "configmaps"}
	quota := func(n string) error {
		return fmt.Errorf("apply ConfigMap/%s: %w", n, apierrors.NewForbidden(gr, n, errors.New("exceeded quota")))
	}
	down := func(n string) error {
		return fmt.Errorf("apply ConfigMap/%s: %w", n, apierrors.NewInternalError(errors.New("etcd")))
	}
	for _, tc := range []struct {
		name string
		errs []error
		want int
	}{
		{"refusals", []error{quota("a"), Invalidf("Secret/s: data.k is not base64"), quota("b")}, 3},
		{"server down", []error{down("a"), down("b"), down("c")}, 1},
		{"a refusal, then the server down", []error{quota("a"), down("b")}, 1},
	} {
		e := rejected("validate", tc.errs)
		if len(e.Errs) != tc.want {
			t.Errorf("%s: %d errors named, want %d: %v", tc.name, len(e.Errs), tc.want, e)
		}
	}
}

// TestSourceReasonsAreReasons: every reason the source gives is one of the
// loop's closed set, so Classify may take it as it is.
func TestSourceReasonsAreReasons(t *testing.T) {
	for _, r := range []source.Reason{source.ReasonAuth, source.ReasonNotFound, source.ReasonTimeout, source.ReasonUnavailable, source.ReasonOther} {
		if !slices.Contains(Reasons, Reason(r)) {
			t.Errorf("source reason %q is not in reconcile.Reasons %v", r, Reasons)
		}
	}
}
