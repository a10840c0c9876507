package git

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
)

func TestWrapGoGit(t *testing.T) {
	cause := &url.Error{Op: "Post", URL: "http://x/git-upload-pack", Err: &net.OpError{Op: "dial", Err: errors.New("refused")}}
	err := fmt.Errorf("fetch x: %w", wrapGoGit(fmt.Errorf("pack: %w", plumbing.NewUnexpectedError(cause))))
	var urlErr *url.Error
	var opErr *net.OpError
	if !errors.As(err, &urlErr) || !errors.As(err, &opErr) {
		t.Errorf("cause of an UnexpectedError not reachable from %v", err)
	}
	err = wrapGoGit(fmt.Errorf("list: %w: %s", transport.ErrAuthenticationRequired, "Unauthorized\n"))
	if err.Error() != "list: authentication required: Unauthorized" || !errors.Is(err, transport.ErrAuthenticationRequired) {
		t.Errorf("wrapGoGit() = %q", err)
	}
	err = wrapGoGit(plumbing.NewPermanentError(transport.ErrRepositoryNotFound))
	if !errors.Is(err, transport.ErrRepositoryNotFound) {
		t.Errorf("cause of a PermanentError not reachable from %v", err)
	}
}

func TestResolveAdvertised(t *testing.T) {
	h1 := plumbing.NewHash(strings.Repeat("1", 40))
	h2 := plumbing.NewHash(strings.Repeat("2", 40))
	refs := []*plumbing.Reference{
		plumbing.NewSymbolicReference(plumbing.HEAD, "refs/heads/main"),
		plumbing.NewHashReference("refs/heads/main", h1),
		plumbing.NewHashReference("refs/heads/same", h1),
		plumbing.NewHashReference("refs/tags/same", h2),
		plumbing.NewHashReference("refs/tags/v1", h2),
	}
	tests := []struct {
		ref  string
		name plumbing.ReferenceName
		hash plumbing.Hash
	}{
		{"", "refs/heads/main", h1},
		{"main", "refs/heads/main", h1},
		{"v1", "refs/tags/v1", h2},
		{"same", "refs/heads/same", h1}, // branches win
		{"refs/tags/same", "refs/tags/same", h2},
	}
	for _, tt := range tests {
		name, hash, err := resolveAdvertised(refs, tt.ref)
		if err != nil || name != tt.name || hash != tt.hash {
			t.Errorf("resolveAdvertised(%q) = %s, %s, %v; want %s, %s", tt.ref, name, hash, err, tt.name, tt.hash)
		}
	}
	if _, _, err := resolveAdvertised(refs, "nope"); !errors.Is(err, plumbing.ErrReferenceNotFound) {
		t.Errorf("resolveAdvertised(nope) error = %v", err)
	}
	// A remote HEAD that is not symbolic is used as is.
	refs = []*plumbing.Reference{plumbing.NewHashReference(plumbing.HEAD, h2)}
	if name, hash, err := resolveAdvertised(refs, ""); err != nil || name != plumbing.HEAD || hash != h2 {
		t.Errorf("resolveAdvertised(detached HEAD) = %s, %s, %v", name, hash, err)
	}
}

// TestBrokenCache: every error that is not the remote's, the network's, the
// credentials', a missing ref's or a stop's may come from the clone, which
// is then rebuilt: also the damage go-git has no type for (garbage in a pack
// or an index, a truncated file).
func TestBrokenCache(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"cache error", &cacheError{errors.New("reopen")}, true},
		{"object missing", fmt.Errorf("x: %w", plumbing.ErrObjectNotFound), true},
		{"garbage in a pack", errors.New("object 0123: invalid git object: type \"unknown\""), true},
		{"garbage in an index", errors.New("malformed IDX file"), true},
		{"truncated file", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{"disk full", fmt.Errorf("write: %w", syscall.ENOSPC), true},
		{"stopped", fmt.Errorf("x: %w", context.Canceled), false},
		{"deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), false},
		{"ref missing", fmt.Errorf("ref %q: %w", "main", plumbing.ErrReferenceNotFound), false},
		{"authentication", transport.ErrAuthenticationRequired, false},
		{"authorization", transport.ErrAuthorizationFailed, false},
		{"no repository", transport.ErrRepositoryNotFound, false},
		{"credentials file", fmt.Errorf("%w: %w", errCredentials, os.ErrNotExist), false},
		{"network", &url.Error{Op: "Get", URL: "https://h", Err: errors.New("dial")}, false},
		{"network, as go-git returns it", plumbing.NewUnexpectedError(&url.Error{Op: "Get", URL: "https://h", Err: syscall.ECONNREFUSED}), false},
		{"server error, as go-git returns it", plumbing.NewUnexpectedError(gitHTTPErr(503)), false},
		{"too many requests, as go-git returns it", plumbing.NewUnexpectedError(gitHTTPErr(429)), false},
		{"refused", fmt.Errorf("dial: %w", syscall.ECONNREFUSED), false},
		{"ssh key refused", errors.New("ssh: unable to authenticate, attempted methods [none publickey]"), false},
		{"listing refs (an answer that is not Git's)", &remoteError{errors.New("list remote refs: invalid pkt-len found")}, false},
	} {
		if got := brokenCache(tc.err); got != tc.want {
			t.Errorf("%s: brokenCache(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
