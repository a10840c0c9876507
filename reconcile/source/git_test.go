package source

import (
	"compress/flate"
	"compress/zlib"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
)

func TestNew(t *testing.T) {
	dir := t.TempDir()
	kh := writeFile(t, filepath.Join(dir, "known_hosts"), "")
	tests := []struct {
		name    string
		cfg     Config
		wantErr string // substring; "" means success
		kind    kind
	}{
		{"ssh URL without known_hosts", Config{URL: "ssh://git@example.com/org/repo.git", CacheDir: dir}, "set KnownHostsFile", 0},
		{"scp-like without known_hosts", Config{URL: "git@example.com:org/repo.git", CacheDir: dir}, "InsecureSkipHostKeyCheck", 0},
		{"ssh URL insecure", Config{URL: "ssh://git@example.com:2222/org/repo.git", CacheDir: dir, InsecureSkipHostKeyCheck: true}, "", kindSSH},
		{"scp-like insecure", Config{URL: "git@example.com:org/repo.git", CacheDir: dir, InsecureSkipHostKeyCheck: true}, "", kindSSH},
		{"scp-like known_hosts", Config{URL: "git@example.com:org/repo.git", CacheDir: dir, KnownHostsFile: kh, SSHKeyFile: "/k"}, "", kindSSH},
		{"ssh both host key options", Config{URL: "git@example.com:org/repo.git", CacheDir: dir, KnownHostsFile: kh, InsecureSkipHostKeyCheck: true}, "not both", 0},
		{"ssh with token file", Config{URL: "git@example.com:org/repo.git", CacheDir: dir, InsecureSkipHostKeyCheck: true, TokenFile: "/t"}, "only to https", 0},
		{"https", Config{URL: "https://example.com/org/repo.git", CacheDir: dir, TokenFile: "/t"}, "", kindHTTP},
		{"https without cache dir", Config{URL: "https://example.com/org/repo.git"}, "cache directory", 0},
		{"https password and token", Config{URL: "https://example.com/r", CacheDir: dir, PasswordFile: "/p", TokenFile: "/t"}, "not both", 0},
		{"https with ssh key", Config{URL: "https://example.com/r", CacheDir: dir, SSHKeyFile: "/k"}, "only to ssh", 0},
		{"git protocol", Config{URL: "git://example.com/r", CacheDir: dir}, "unsupported URL scheme", 0},
		{"local path", Config{URL: dir}, "", kindLocal},
		{"file URL", Config{URL: "file://" + dir}, "", kindLocal},
		{"file URL with host", Config{URL: "file://other" + dir}, "must not name a host", 0},
		{"local with credentials", Config{URL: dir, TokenFile: "/t"}, "local repository", 0},
		{"empty URL", Config{}, "URL is empty", 0},
		{"bad ref", Config{URL: dir, Ref: "a..b"}, "invalid reference name", 0},
		{"refspec-like ref", Config{URL: dir, Ref: "main:refs/x"}, "invalid reference name", 0},
		{"path leaving the repo", Config{URL: dir, Path: "a/../../x"}, "leaves the repository", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(tt.cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("New() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("New(): %v", err)
			}
			if s.kind != tt.kind {
				t.Errorf("kind = %v, want %v", s.kind, tt.kind)
			}
		})
	}
}

func TestNewCleansPath(t *testing.T) {
	for in, want := range map[string]string{"": ".", ".": ".", "/": ".", "deploy/": "deploy", "/a/./b/": "a/b", "a/../b": "b", "//x": "x"} {
		s := mustNew(t, Config{URL: t.TempDir(), Path: in})
		if s.dir != want {
			t.Errorf("Path %q cleaned to %q, want %q", in, s.dir, want)
		}
	}
}

func TestDisplayURLAndRemoteCarryNoSecrets(t *testing.T) {
	tests := []struct {
		url, display, remote string
	}{
		{"https://alice:s3cret@example.com/org/repo.git", "https://example.com/org/repo.git", "https://example.com/org/repo.git"},
		{"https://s3cret@example.com/org/repo.git", "https://example.com/org/repo.git", "https://example.com/org/repo.git"},
		{"http://example.com:8080/repo", "http://example.com:8080/repo", "http://example.com:8080/repo"},
		{"ssh://git:s3cret@example.com:2222/org/repo.git", "ssh://git@example.com:2222/org/repo.git", "ssh://git@example.com:2222/org/repo.git"},
		{"git:s3cret@example.com:org/repo.git", "git@example.com:org/repo.git", "git@example.com:org/repo.git"},
		{"git@github.com:org/repo.git", "git@github.com:org/repo.git", "git@github.com:org/repo.git"},
	}
	for _, tt := range tests {
		s := mustNew(t, Config{URL: tt.url, CacheDir: t.TempDir(), InsecureSkipHostKeyCheck: strings.Contains(tt.display, "git@")})
		if got := s.DisplayURL(); got != tt.display {
			t.Errorf("DisplayURL(%q) = %q, want %q", tt.url, got, tt.display)
		}
		if s.remote != tt.remote {
			t.Errorf("remote URL for %q = %q, want %q", tt.url, s.remote, tt.remote)
		}
	}
	// Errors from New do not quote the password either.
	_, err := New(Config{URL: "https://alice:s3cret@example.com/r", SSHKeyFile: "/k", CacheDir: t.TempDir()})
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("New() error = %v, want an error without the password", err)
	}
	s := mustNew(t, Config{URL: "https://alice:s3cret@example.com/r", CacheDir: t.TempDir()})
	if s.urlUser != "alice" || s.urlPassword != "s3cret" {
		t.Errorf("URL credentials = %q/%q, want alice/s3cret", s.urlUser, s.urlPassword)
	}
}

func TestNewSSHUserDefaults(t *testing.T) {
	s := mustNew(t, Config{URL: "ssh://example.com/repo.git", CacheDir: t.TempDir(), InsecureSkipHostKeyCheck: true})
	if s.sshUser != "git" || s.sshAddr != "example.com:22" {
		t.Errorf("ssh user, addr = %q, %q; want git, example.com:22", s.sshUser, s.sshAddr)
	}
	s = mustNew(t, Config{URL: "deploy@example.com:org/repo.git", CacheDir: t.TempDir(), InsecureSkipHostKeyCheck: true})
	if s.sshUser != "deploy" {
		t.Errorf("ssh user = %q, want deploy", s.sshUser)
	}
}

// localFixture is a repository with two commits on master, a branch and
// tags of both kinds.
type localFixture struct {
	dir            string
	c1, c2, c3     string // c3 is only on branch dev
	annotatedTagID string // the tag object behind v2
}

func newLocalFixture(t *testing.T) localFixture {
	dir := t.TempDir()
	r := newTestRepo(t, dir)
	c1 := r.commit(map[string]string{"deploy/cm.yaml": cm("one")})
	c2 := r.commit(map[string]string{"deploy/cm.yaml": cm("two")})
	r.tag("v1", c1, false)
	tagID := r.tag("v2", c2, true)
	// c3 on dev: commit, then move master back to c2.
	c3 := r.commit(map[string]string{"deploy/cm.yaml": cm("three")})
	r.branch("dev", c3)
	r.branch("master", c2)
	return localFixture{dir: dir, c1: c1, c2: c2, c3: c3, annotatedTagID: tagID}
}

func cm(name string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n"
}

func TestFetchLocal(t *testing.T) {
	f := newLocalFixture(t)
	if f.annotatedTagID == f.c2 {
		t.Fatal("fixture: annotated tag should be a tag object, not the commit")
	}
	for _, url := range []string{f.dir, "file://" + f.dir, filepath.Join(f.dir, "deploy")} {
		tests := []struct{ ref, want string }{
			{"", f.c2}, // HEAD → master
			{"HEAD", f.c2},
			{"master", f.c2},
			{"dev", f.c3},
			{"refs/heads/dev", f.c3},
			{"v1", f.c1},
			{"v2", f.c2}, // annotated: peeled to the commit
			{"refs/tags/v2", f.c2},
			{f.c1, f.c1},
			{strings.ToUpper(f.c3), f.c3},
		}
		for _, tt := range tests {
			t.Run(url+"@"+tt.ref, func(t *testing.T) {
				s := mustNew(t, Config{URL: url, Ref: tt.ref})
				rev := mustFetch(t, s)
				if rev.SHA != tt.want || rev.Fetched {
					t.Errorf("Fetch() = %+v, want {SHA:%s Fetched:false}", rev, tt.want)
				}
			})
		}
	}
}

func TestFetchLocalSeesNewCommits(t *testing.T) {
	dir := t.TempDir()
	r := newTestRepo(t, dir)
	c1 := r.commit(map[string]string{"a.yaml": cm("a")})
	s := mustNew(t, Config{URL: dir})
	if rev := mustFetch(t, s); rev.SHA != c1 {
		t.Fatalf("Fetch() = %s, want %s", rev.SHA, c1)
	}
	c2 := r.commit(map[string]string{"a.yaml": cm("b")})
	if rev := mustFetch(t, s); rev.SHA != c2 || rev.Fetched {
		t.Fatalf("Fetch() = %+v, want %s unfetched", rev, c2)
	}
}

// Moved tells whether the followed ref moved away from a revision without
// fetching, and without the clone's lock (a render holds it while Moved is
// asked): locally and over HTTP; a ref that is a commit SHA never moves.
func TestMoved(t *testing.T) {
	for _, tc := range []struct {
		name   string
		remote bool
	}{{"local", false}, {"http", true}} {
		t.Run(tc.name, func(t *testing.T) {
			var (
				r   *testRepo
				url string
			)
			if tc.remote {
				f := newRemoteFixture(t, nil)
				r, url = f.repo, f.url
			} else {
				url = t.TempDir()
				r = newTestRepo(t, url)
			}
			c1 := r.commit(map[string]string{"a.yaml": cm("a")})
			s := mustNew(t, Config{URL: url, CacheDir: t.TempDir()})
			rev := mustFetch(t, s)
			moved := func() bool {
				t.Helper()
				type answer struct {
					moved bool
					err   error
				}
				ch := make(chan answer, 1)
				// The clone locked as by a render: Moved must not wait for it.
				mu := cacheLock(s.cache)
				mu.Lock()
				defer mu.Unlock()
				go func() {
					m, err := s.Moved(context.Background(), rev)
					ch <- answer{m, err}
				}()
				select {
				case a := <-ch:
					if a.err != nil {
						t.Fatalf("Moved: %v", a.err)
					}
					return a.moved
				case <-time.After(time.Minute): // hang guard
					t.Fatal("Moved waited for the clone's lock")
					return false
				}
			}
			if moved() {
				t.Fatalf("Moved at %s = true before any new commit", c1[:12])
			}
			r.commit(map[string]string{"a.yaml": cm("b")})
			if !moved() {
				t.Fatal("Moved = false after a new commit on the followed ref")
			}
			pinned := mustNew(t, Config{URL: url, Ref: c1, CacheDir: t.TempDir()})
			prev := mustFetch(t, pinned)
			if m, err := pinned.Moved(context.Background(), prev); err != nil || m {
				t.Errorf("Moved with a ref that is a commit SHA = %v, %v; want false", m, err)
			}
		})
	}
}

func TestFetchLocalErrors(t *testing.T) {
	f := newLocalFixture(t)
	for _, ref := range []string{"nope", "refs/heads/nope", "refs/tags/v3", strings.Repeat("ab", 20)} {
		s := mustNew(t, Config{URL: f.dir, Ref: ref})
		_, err := s.Fetch(context.Background())
		if !errors.Is(err, plumbing.ErrReferenceNotFound) {
			t.Errorf("Fetch(ref %q) error = %v, want ErrReferenceNotFound", ref, err)
		}
		if err != nil && !strings.Contains(err.Error(), f.dir) {
			t.Errorf("error %q does not name the source", err)
		}
	}

	s := mustNew(t, Config{URL: t.TempDir()})
	if _, err := s.Fetch(context.Background()); !errors.Is(err, git.ErrRepositoryNotExists) {
		t.Errorf("Fetch(not a repository) error = %v, want ErrRepositoryNotExists", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s = mustNew(t, Config{URL: f.dir})
	if _, err := s.Fetch(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Fetch(canceled) error = %v, want context.Canceled", err)
	}
}

// remoteFixture serves one repository over smart HTTP.
type remoteFixture struct {
	repo *testRepo
	url  string // without credentials
	srv  string
}

func newRemoteFixture(t *testing.T, check func(*http.Request) int) remoteFixture {
	root := t.TempDir()
	srv := gitHTTPServer(t, root, check)
	r := newTestRepo(t, filepath.Join(root, "repo"))
	return remoteFixture{repo: r, url: srv.URL + "/repo", srv: srv.URL}
}

func TestHTTPFetch(t *testing.T) {
	f := newRemoteFixture(t, nil)
	c1 := f.repo.commit(map[string]string{"deploy/cm.yaml": cm("one"), "other.txt": "x"})
	cache := t.TempDir()
	s := mustNew(t, Config{URL: f.url, Path: "deploy", CacheDir: cache})

	rev := mustFetch(t, s)
	if rev.SHA != c1 || !rev.Fetched {
		t.Fatalf("first Fetch() = %+v, want {SHA:%s Fetched:true}", rev, c1)
	}
	if filepath.Dir(s.cache) != cache {
		t.Errorf("clone kept in %s, want a subdirectory of %s", s.cache, cache)
	}
	if _, err := os.Stat(filepath.Join(s.cache, "shallow")); err != nil {
		t.Errorf("clone is not shallow: %v", err)
	}
	if _, err := os.Stat(filepath.Join(s.cache, "HEAD")); err != nil {
		t.Errorf("clone is not a bare repository: %v", err)
	}

	rev = mustFetch(t, s)
	if rev.SHA != c1 || rev.Fetched {
		t.Fatalf("second Fetch() = %+v, want {SHA:%s Fetched:false}", rev, c1)
	}

	c2 := f.repo.commit(map[string]string{"deploy/cm.yaml": cm("two")})
	rev = mustFetch(t, s)
	if rev.SHA != c2 || !rev.Fetched {
		t.Fatalf("Fetch() after a new commit = %+v, want {SHA:%s Fetched:true}", rev, c2)
	}
	ms, err := s.Render(context.Background(), rev.SHA)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(ms); len(got) != 1 || got[0] != "deploy/cm.yaml ConfigMap/two" {
		t.Errorf("Render() = %v, want [deploy/cm.yaml ConfigMap/two]", got)
	}

	// The cache is an ordinary bare repository with the branch in it.
	if rev := mustFetch(t, mustNew(t, Config{URL: s.cache, Ref: "master"})); rev.SHA != c2 {
		t.Errorf("cache's master = %s, want %s", rev.SHA, c2)
	}

	// A second Source on the same cache (e.g. after a restart) finds the
	// commit cached and does not fetch.
	rev = mustFetch(t, mustNew(t, Config{URL: f.url, CacheDir: cache}))
	if rev.SHA != c2 || rev.Fetched {
		t.Errorf("Fetch() from a warm cache = %+v, want {SHA:%s Fetched:false}", rev, c2)
	}
}

func TestHTTPFetchRefs(t *testing.T) {
	f := newRemoteFixture(t, nil)
	c0 := f.repo.commit(map[string]string{"cm.yaml": cm("zero")}) // never a ref's tip
	c1 := f.repo.commit(map[string]string{"cm.yaml": cm("one")})
	c2 := f.repo.commit(map[string]string{"cm.yaml": cm("two")})
	f.repo.branch("dev", c1)
	f.repo.tag("v1", c1, true)
	f.repo.tag("light", c2, false)
	cache := t.TempDir()

	// The cases share the cache and run in order: fetched says whether the
	// commit had to be fetched.
	tests := []struct {
		ref, want string
		fetched   bool
	}{
		{"", c2, true},
		{"master", c2, false},
		{"dev", c1, true},
		{"refs/heads/dev", c1, false},
		{"v1", c1, true}, // annotated tag: the tag object is new, peeled to c1
		{"light", c2, false},
		{c2, c2, false},
		{c0, c0, true}, // below the shallow boundary: needs a full fetch
		{c0, c0, false},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			s := mustNew(t, Config{URL: f.url, Ref: tt.ref, CacheDir: cache})
			rev := mustFetch(t, s)
			if rev.SHA != tt.want || rev.Fetched != tt.fetched {
				t.Fatalf("Fetch() = %+v, want {SHA:%s Fetched:%v}", rev, tt.want, tt.fetched)
			}
			ms, err := s.Render(context.Background(), rev.SHA)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{c0: "zero", c1: "one", c2: "two"}[tt.want]
			if len(ms) != 1 || ms[0].Object.GetName() != want {
				t.Errorf("Render() = %v, want ConfigMap/%s", names(ms), want)
			}
			if isSHA(tt.ref) && tt.fetched {
				if _, err := os.Stat(filepath.Join(s.cache, "shallow")); !os.IsNotExist(err) {
					t.Errorf("cache still shallow after fetching commit %s (stat: %v)", tt.ref, err)
				}
			}
		})
	}

	for _, ref := range []string{"nope", "refs/heads/nope", strings.Repeat("0123456789", 4)} {
		s := mustNew(t, Config{URL: f.url, Ref: ref, CacheDir: cache})
		if _, err := s.Fetch(context.Background()); !errors.Is(err, plumbing.ErrReferenceNotFound) {
			t.Errorf("Fetch(ref %q) error = %v, want ErrReferenceNotFound", ref, err)
		}
	}
}

func TestHTTPRepositoryNotFound(t *testing.T) {
	f := newRemoteFixture(t, nil)
	f.repo.commit(map[string]string{"cm.yaml": cm("one")})
	s := mustNew(t, Config{URL: f.srv + "/missing", CacheDir: t.TempDir()})
	if _, err := s.Fetch(context.Background()); !errors.Is(err, transport.ErrRepositoryNotFound) {
		t.Errorf("Fetch() error = %v, want ErrRepositoryNotFound", err)
	}
}

func TestHTTPBrokenCacheIsRebuilt(t *testing.T) {
	f := newRemoteFixture(t, nil)
	c0 := f.repo.commit(map[string]string{"cm.yaml": cm("zero")})
	c1 := f.repo.commit(map[string]string{"cm.yaml": cm("one")})

	removeObjects := func(t *testing.T, s *Source) {
		packs, _ := filepath.Glob(filepath.Join(s.cache, "objects", "pack", "*"))
		loose, _ := filepath.Glob(filepath.Join(s.cache, "objects", "??"))
		if len(packs)+len(loose) == 0 {
			t.Fatal("no objects in the cache to remove")
		}
		for _, p := range append(packs, loose...) {
			if err := os.RemoveAll(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		name       string
		first, ref string // refs of the fetch that fills the cache, and of the one after the damage
		damage     func(*testing.T, *Source)
		want       string
	}{
		// Objects gone, refs left: the refs claim everything is up to date
		// (go-git notices missing tips and fetches them again).
		{"shallow clone without objects", "master", "master", removeObjects, c1},
		{"full clone without objects", c0, c1, removeObjects, c1},
		{"a file instead of a repository", "master", "master", func(t *testing.T, s *Source) {
			if err := os.RemoveAll(s.cache); err != nil {
				t.Fatal(err)
			}
			writeFile(t, s.cache, "garbage")
		}, c1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cache := t.TempDir()
			s := mustNew(t, Config{URL: f.url, Ref: tt.first, CacheDir: cache})
			mustFetch(t, s)
			tt.damage(t, s)
			s = mustNew(t, Config{URL: f.url, Ref: tt.ref, CacheDir: cache})
			if rev := mustFetch(t, s); rev.SHA != tt.want || !rev.Fetched {
				t.Fatalf("Fetch() on a damaged cache = %+v, want {SHA:%s Fetched:true}", rev, tt.want)
			}
			if _, err := s.Render(context.Background(), tt.want); err != nil {
				t.Fatalf("Render() after rebuild: %v", err)
			}
		})
	}
}

func TestHTTPBasicAuth(t *testing.T) {
	var requests atomic.Int32
	f := newRemoteFixture(t, func(r *http.Request) int {
		requests.Add(1)
		user, pass, ok := r.BasicAuth()
		switch {
		case !ok:
			return http.StatusUnauthorized
		case (user == "alice" && pass == "s3cret") || (user == "git" && pass == "tok3n"):
			return 0
		default:
			return http.StatusForbidden
		}
	})
	c1 := f.repo.commit(map[string]string{"cm.yaml": cm("one")})
	dir := t.TempDir()
	good := writeFile(t, filepath.Join(dir, "good"), "s3cret\n")
	bad := writeFile(t, filepath.Join(dir, "bad"), "wr0ng-pw\n")
	token := writeFile(t, filepath.Join(dir, "token"), "tok3n \r\n")
	withCreds := strings.Replace(f.url, "http://", "http://alice:s3cret@", 1)
	withBadCreds := strings.Replace(f.url, "http://", "http://alice:wr0ng-pw@", 1)

	tests := []struct {
		name string
		cfg  Config
		want error // nil: success
	}{
		{"no credentials", Config{URL: f.url}, transport.ErrAuthenticationRequired},
		{"wrong password", Config{URL: f.url, Username: "alice", PasswordFile: bad}, transport.ErrAuthorizationFailed},
		{"password file", Config{URL: f.url, Username: "alice", PasswordFile: good}, nil},
		{"token file, default user", Config{URL: f.url, TokenFile: token}, nil},
		{"credentials in URL", Config{URL: withCreds}, nil},
		{"wrong credentials in URL", Config{URL: withBadCreds}, transport.ErrAuthorizationFailed},
		{"missing password file", Config{URL: f.url, Username: "alice", PasswordFile: filepath.Join(dir, "none")}, os.ErrNotExist},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.CacheDir = t.TempDir()
			s := mustNew(t, tt.cfg)
			if strings.Contains(s.DisplayURL(), "s3cret") || strings.Contains(s.DisplayURL(), "alice") {
				t.Errorf("DisplayURL() = %q carries credentials", s.DisplayURL())
			}
			rev, err := s.Fetch(context.Background())
			if tt.want == nil {
				if err != nil || rev.SHA != c1 {
					t.Fatalf("Fetch() = %+v, %v; want %s", rev, err, c1)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Fetch() error = %v, want %v", err, tt.want)
			}
			for _, secret := range []string{"s3cret", "wr0ng-pw", "tok3n"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q contains a secret", err)
				}
			}
		})
	}
	if requests.Load() == 0 {
		t.Fatal("the auth check never ran")
	}

	// The password file is read at each fetch: fixing it fixes the source.
	pw := writeFile(t, filepath.Join(dir, "rotating"), "old")
	s := mustNew(t, Config{URL: f.url, Username: "alice", PasswordFile: pw, CacheDir: t.TempDir()})
	if _, err := s.Fetch(context.Background()); !errors.Is(err, transport.ErrAuthorizationFailed) {
		t.Fatalf("Fetch() with the old password: %v, want ErrAuthorizationFailed", err)
	}
	writeFile(t, pw, "s3cret")
	if rev := mustFetch(t, s); rev.SHA != c1 {
		t.Fatalf("Fetch() after rotation = %+v, want %s", rev, c1)
	}
}

func TestHTTPUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there any more

	for _, ref := range []string{"", strings.Repeat("ab", 20)} {
		s := mustNew(t, Config{URL: "http://" + addr + "/repo", Ref: ref, CacheDir: t.TempDir()})
		_, err = s.Fetch(context.Background())
		var opErr *net.OpError
		var urlErr *url.Error
		if !errors.As(err, &opErr) && !errors.As(err, &urlErr) {
			t.Errorf("Fetch(ref %q) error = %v (%T), want a *net.OpError or *url.Error", ref, err, err)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "fetch http://"+addr+"/repo: ") {
			t.Errorf("error %q lacks the fetch context", err)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s := mustNew(t, Config{URL: "http://" + addr + "/repo", CacheDir: t.TempDir()})
	if _, err := s.Fetch(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Fetch(canceled) error = %v, want context.Canceled", err)
	}
}

func TestSSHFetchNeedsKnownHostsFile(t *testing.T) {
	s := mustNew(t, Config{URL: "git@127.0.0.1:org/repo.git", CacheDir: t.TempDir(),
		KnownHostsFile: filepath.Join(t.TempDir(), "missing"), SSHKeyFile: "/nonexistent"})
	_, err := s.Fetch(context.Background())
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "known_hosts") {
		t.Errorf("Fetch() error = %v, want a known_hosts file-not-found error", err)
	}
}

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

// TestDamagedObjectIsClonedAfresh: an object of the clone that Fetch did
// not read (a blob, damaged in the pack after the fetch) fails the render;
// the next Fetch clones afresh, and the render works again, once per
// revision. A commit that fails in itself costs no fresh clone.
func TestDamagedObjectIsClonedAfresh(t *testing.T) {
	f := newRemoteFixture(t, nil)
	// A blob big enough to sit in the pack's tail, after commit and trees.
	// (Hex of a hash chain, so that it does not compress away.)
	var noise strings.Builder
	h := sha256.Sum256([]byte("seed"))
	for noise.Len() < 200_000 {
		h = sha256.Sum256(h[:])
		noise.WriteString(hex.EncodeToString(h[:]))
	}
	big := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n  k: \"" + noise.String() + "\"\n"
	c0 := f.repo.commit(map[string]string{"cm.yaml": cm("zero"), "big.yaml": big})
	s := mustNew(t, Config{URL: f.url, Ref: "master", CacheDir: t.TempDir()})
	if rev := mustFetch(t, s); rev.SHA != c0 {
		t.Fatalf("fetched %s, want %s", rev.SHA, c0)
	}
	packs, _ := filepath.Glob(filepath.Join(s.cache, "objects", "pack", "*.pack"))
	if len(packs) != 1 {
		t.Fatalf("packs in the clone: %v, want 1", packs)
	}
	b, err := os.ReadFile(packs[0])
	if err != nil {
		t.Fatal(err)
	}
	// Garbage over the middle of the big blob's compressed bytes (the pack
	// ends with a 20-byte checksum).
	for i := len(b) - 2000; i < len(b)-1000; i++ {
		b[i] ^= 0x5a
	}
	if err := os.WriteFile(packs[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Render(context.Background(), c0); err == nil {
		t.Fatal("Render() of a damaged blob succeeded: the damage missed it")
	}
	if rev := mustFetch(t, s); rev.SHA != c0 || !rev.Fetched {
		t.Fatalf("Fetch() after a render that could not read the clone = %+v, want a fresh clone of %s", rev, c0)
	}
	if _, err := s.Render(context.Background(), c0); err != nil {
		t.Fatalf("Render() after the fresh clone: %v", err)
	}
	// A read fault that a fresh clone did not cure is not cloned for again.
	readErr := fmt.Errorf("blob: %w", io.ErrUnexpectedEOF)
	s.renderFailed(c0, readErr)
	if sha := s.takeSuspect(); sha != "" {
		t.Errorf("a revision cloned afresh once is cloned for again after a read fault (%s)", sha)
	}
	// A commit bad in itself (invalid YAML) is not the clone's fault.
	c1 := f.repo.commit(map[string]string{"cm.yaml": "kind: [", "big.yaml": big})
	mustFetch(t, s)
	for range 2 {
		if _, err := s.Render(context.Background(), c1); err == nil {
			t.Fatal("Render() of invalid YAML succeeded")
		}
		if rev := mustFetch(t, s); rev.Fetched {
			t.Errorf("Fetch() after a render that failed on the commit's content cloned afresh (%+v)", rev)
		}
	}
}

// TestReadFault: the errors of a clone that cannot give an object's content
// (so worth one fresh clone) are told from a commit's own faults.
func TestReadFault(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"marked read error", &ManifestError{File: "a.yaml", Err: &objectReadError{Err: errors.New("read: x")}}, true},
		{"garbage in a deflate stream", &ManifestError{File: "a.yaml", Err: fmt.Errorf("read: %w", flate.CorruptInputError(12))}, true},
		{"zlib checksum", fmt.Errorf("blob: %w", zlib.ErrChecksum), true},
		{"object missing", fmt.Errorf("blob: %w", plumbing.ErrObjectNotFound), true},
		{"invalid YAML", &ManifestError{File: "a.yaml", Err: errors.New("yaml: line 1: did not find expected node content")}, false},
		{"a limit", &ManifestError{File: "a.yaml", Err: errors.New("bytes limit exceeded")}, false},
	} {
		if got := readFault(tc.err); got != tc.want {
			t.Errorf("%s: readFault(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
