package source

import (
	"context"
	"io"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// testRepo is a real repository with a worktree, built with go-git.
type testRepo struct {
	t    testing.TB
	dir  string
	repo *git.Repository
	when time.Time
}

func newTestRepo(t testing.TB, dir string) *testRepo {
	t.Helper()
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	return &testRepo{t: t, dir: dir, repo: repo, when: time.Unix(1_700_000_000, 0)}
}

func (r *testRepo) sig() *object.Signature {
	r.when = r.when.Add(time.Minute)
	return &object.Signature{Name: "Test", Email: "test@example.com", When: r.when}
}

// commit writes files (an empty content deletes the file), stages
// everything and commits on the current branch. It returns the commit SHA.
func (r *testRepo) commit(files map[string]string) string {
	r.t.Helper()
	return r.signedCommit(nil, files)
}

// signedCommit is commit signed with key (unsigned when nil).
func (r *testRepo) signedCommit(key *openpgp.Entity, files map[string]string) string {
	r.t.Helper()
	for name, content := range files {
		p := filepath.Join(r.dir, filepath.FromSlash(name))
		if content == "" {
			if err := os.Remove(p); err != nil {
				r.t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
	wt, err := r.repo.Worktree()
	if err != nil {
		r.t.Fatal(err)
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		r.t.Fatal(err)
	}
	h, err := wt.Commit("commit", &git.CommitOptions{Author: r.sig(), AllowEmptyCommits: true, SignKey: key})
	if err != nil {
		r.t.Fatal(err)
	}
	return h.String()
}

// branch points refs/heads/name at sha.
func (r *testRepo) branch(name, sha string) {
	r.t.Helper()
	ref := plumbing.NewHashReference(plumbing.NewBranchReferenceName(name), plumbing.NewHash(sha))
	if err := r.repo.Storer.SetReference(ref); err != nil {
		r.t.Fatal(err)
	}
}

// tag creates a lightweight tag, or an annotated one when annotated is set,
// and returns the hash the tag ref points at.
func (r *testRepo) tag(name, sha string, annotated bool) string {
	r.t.Helper()
	var opts *git.CreateTagOptions
	if annotated {
		opts = &git.CreateTagOptions{Tagger: r.sig(), Message: "release " + name}
	}
	ref, err := r.repo.CreateTag(name, plumbing.NewHash(sha), opts)
	if err != nil {
		r.t.Fatal(err)
	}
	return ref.Hash().String()
}

// gitProgram is the path of one of git's own programs (git-http-backend,
// git-upload-pack); the test is skipped, naming what it tries (what),
// where git or the program is missing.
func gitProgram(t *testing.T, name, what string) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed; skipping " + what + " tests")
	}
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Skipf("git --exec-path: %v", err)
	}
	path := filepath.Join(strings.TrimSpace(string(out)), name)
	if _, err := os.Stat(path); err != nil {
		t.Skipf("%s: %v", name, err)
	}
	return path
}

// gitHTTPServer serves the repositories under root over smart HTTP with
// `git http-backend`. check, if not nil, may refuse a request by returning
// an HTTP status.
func gitHTTPServer(t *testing.T, root string, check func(*http.Request) int) *httptest.Server {
	t.Helper()
	backend := gitProgram(t, "git-http-backend", "smart-HTTP")
	cgiHandler := &cgi.Handler{
		Path:   backend,
		Stderr: io.Discard, // "Not a git repository" and the like
		Env: []string{
			"GIT_PROJECT_ROOT=" + root,
			"GIT_HTTP_EXPORT_ALL=1",
			"GIT_CONFIG_NOSYSTEM=1",
			"HOME=" + t.TempDir(),
			"PATH=" + os.Getenv("PATH"),
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if check != nil {
			if code := check(r); code != 0 {
				if code == http.StatusUnauthorized {
					w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
				}
				http.Error(w, http.StatusText(code), code)
				return
			}
		}
		cgiHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func mustNew(t testing.TB, cfg Config) *Source {
	t.Helper()
	if cfg.Worker == nil && cfg.Renderer == nil {
		cfg.Renderer = inProcess
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	return s
}

func mustFetch(t *testing.T, s *Source) Revision {
	t.Helper()
	rev, err := s.Fetch(context.Background())
	if err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	return rev
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return name
}

// names lists "File Kind/name" for each manifest.
func names(ms []Manifest) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.File+" "+m.Object.GetKind()+"/"+m.Object.GetName())
	}
	return out
}
