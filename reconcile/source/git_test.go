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
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"

	gitsrc "recond.dev/recond/reconcile/source/git"
	"recond.dev/recond/reconcile/source/render"
)

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
	if filepath.Dir(cacheOf(t, s)) != cache {
		t.Errorf("clone kept in %s, want a subdirectory of %s", cacheOf(t, s), cache)
	}
	if _, err := os.Stat(filepath.Join(cacheOf(t, s), "shallow")); err != nil {
		t.Errorf("clone is not shallow: %v", err)
	}
	if _, err := os.Stat(filepath.Join(cacheOf(t, s), "HEAD")); err != nil {
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
	if rev := mustFetch(t, mustNew(t, Config{URL: cacheOf(t, s), Ref: "master"})); rev.SHA != c2 {
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
				if _, err := os.Stat(filepath.Join(cacheOf(t, s), "shallow")); !os.IsNotExist(err) {
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
		packs, _ := filepath.Glob(filepath.Join(cacheOf(t, s), "objects", "pack", "*"))
		loose, _ := filepath.Glob(filepath.Join(cacheOf(t, s), "objects", "??"))
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
			if err := os.RemoveAll(cacheOf(t, s)); err != nil {
				t.Fatal(err)
			}
			writeFile(t, cacheOf(t, s), "garbage")
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
	packs, _ := filepath.Glob(filepath.Join(cacheOf(t, s), "objects", "pack", "*.pack"))
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
	if rev := mustFetch(t, s); rev.Fetched {
		t.Errorf("a revision cloned afresh once is cloned for again after a read fault (%+v)", rev)
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
		{"marked read error", &ManifestError{File: "a.yaml", Err: &render.ReadError{Err: errors.New("read: x")}}, true},
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

// cacheOf is the directory of s's clone (a Git source's).
func cacheOf(t testing.TB, s *Source) string {
	t.Helper()
	g, ok := s.f.(*gitsrc.Source)
	if !ok {
		t.Fatalf("%s is not a Git source", s.DisplayURL())
	}
	return g.CacheDir()
}

// isSHA reports whether ref is a full 40-hex commit SHA.
func isSHA(ref string) bool {
	_, err := hex.DecodeString(ref)
	return len(ref) == 40 && err == nil
}
