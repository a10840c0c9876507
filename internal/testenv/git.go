package testenv

import (
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Repo is a real Git repository on disk, with a work tree, made with go-git.
type Repo struct {
	t    testing.TB
	Dir  string
	repo *git.Repository
}

// NewRepo creates an empty repository whose default branch is main.
func NewRepo(t testing.TB) *Repo {
	t.Helper()
	dir := t.TempDir()
	r, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{
		InitOptions: git.InitOptions{DefaultBranch: "refs/heads/main"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &Repo{t: t, Dir: dir, repo: r}
}

// URL is the repository as a file:// URL.
func (r *Repo) URL() string { return "file://" + r.Dir }

// Commit writes files (path -> content; an empty content removes the file)
// and commits them, returning the commit SHA.
func (r *Repo) Commit(msg string, files map[string]string) string {
	r.t.Helper()
	wt, err := r.repo.Worktree()
	if err != nil {
		r.t.Fatal(err)
	}
	for p, content := range files {
		full := filepath.Join(r.Dir, p)
		if content == "" {
			if _, err := wt.Remove(p); err != nil {
				r.t.Fatalf("remove %s: %v", p, err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			r.t.Fatal(err)
		}
		if _, err := wt.Add(p); err != nil {
			r.t.Fatal(err)
		}
	}
	h, err := wt.Commit(msg, &git.CommitOptions{
		AllowEmptyCommits: true,
		Author:            &object.Signature{Name: "test", Email: "test@example.com", When: time.Now()},
	})
	if err != nil {
		r.t.Fatal(err)
	}
	return h.String()
}

// ServeHTTP serves the repository over Git's smart HTTP protocol with the git
// binary's http-backend (the server side only: recond itself never runs git)
// and returns its URL. The test is skipped when git is not installed.
func (r *Repo) ServeHTTP(t testing.TB, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Skipf("git not installed: %v", err)
	}
	backend := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	var h http.Handler = &cgi.Handler{
		Path: backend,
		Env:  []string{"GIT_PROJECT_ROOT=" + filepath.Dir(r.Dir), "GIT_HTTP_EXPORT_ALL=1"},
	}
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL + "/" + filepath.Base(r.Dir)
}
