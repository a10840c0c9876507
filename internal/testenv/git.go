package testenv

import (
	"io/fs"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"recond.dev/recond/internal/testenv/tools"
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
	srv := httptest.NewServer(r.httpHandler(t, wrap))
	t.Cleanup(srv.Close)
	return srv.URL + "/" + filepath.Base(r.Dir)
}

// httpHandler is git http-backend for the repository, wrapped by wrap
// (when not nil). The test is skipped when git is not installed.
func (r *Repo) httpHandler(t testing.TB, wrap func(http.Handler) http.Handler) http.Handler {
	t.Helper()
	out, err := exec.Command(tools.Find(t, tools.Git), "--exec-path").Output()
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
	return h
}

// GitServer serves a Repo over smart HTTP (like ServeHTTP) on a fixed
// loopback address, and can be stopped (connections are then refused) and
// started again on the same address.
type GitServer struct {
	t       testing.TB
	handler http.Handler
	addr    string
	url     string

	mu  sync.Mutex
	srv *http.Server
}

// StartHTTPServer serves the repository like ServeHTTP and returns the
// server, already started. It is stopped when the test ends.
func (r *Repo) StartHTTPServer(t testing.TB, wrap func(http.Handler) http.Handler) *GitServer {
	t.Helper()
	s := &GitServer{t: t, handler: r.httpHandler(t, wrap), addr: "127.0.0.1:0"}
	s.Start()
	s.url = "http://" + s.addr + "/" + filepath.Base(r.Dir)
	t.Cleanup(s.Stop)
	return s
}

// URL is the repository's URL on the server.
func (s *GitServer) URL() string { return s.url }

// Start listens again on the server's address (no-op when running). Go's
// listeners set SO_REUSEADDR, so the address is free at once after Stop.
func (s *GitServer) Start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return
	}
	l, err := tools.Relisten(s.addr)
	if err != nil {
		s.t.Fatalf("listen on %s: %v", s.addr, err)
	}
	s.addr = l.Addr().String()
	s.srv = &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second}
	go func(srv *http.Server) { _ = srv.Serve(l) }(s.srv)
}

// Stop closes the listener and every connection (no-op when stopped).
func (s *GitServer) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv == nil {
		return
	}
	_ = s.srv.Close()
	s.srv = nil
}

// SetBranch points branch name at the commit sha, creating the branch when
// missing.
func (r *Repo) SetBranch(name, sha string) {
	r.t.Helper()
	ref := plumbing.NewHashReference(plumbing.NewBranchReferenceName(name), plumbing.NewHash(sha))
	if err := r.repo.Storer.SetReference(ref); err != nil {
		r.t.Fatalf("set branch %s: %v", name, err)
	}
}

// DeleteBranch removes branch name.
func (r *Repo) DeleteBranch(name string) {
	r.t.Helper()
	if err := r.repo.Storer.RemoveReference(plumbing.NewBranchReferenceName(name)); err != nil {
		r.t.Fatalf("delete branch %s: %v", name, err)
	}
}

// Orphan replaces the checked-out branch's history with one new commit,
// unrelated to the old history, whose tree holds exactly files (path ->
// content), as a force-push of another history would. It returns the
// commit SHA.
func (r *Repo) Orphan(msg string, files map[string]string) string {
	r.t.Helper()
	head, err := r.repo.Head()
	if err != nil {
		r.t.Fatal(err)
	}
	c, err := r.repo.CommitObject(head.Hash())
	if err != nil {
		r.t.Fatal(err)
	}
	change := map[string]string{}
	iter, err := c.Files()
	if err != nil {
		r.t.Fatal(err)
	}
	if err := iter.ForEach(func(f *object.File) error {
		if _, keep := files[f.Name]; !keep {
			change[f.Name] = ""
		}
		return nil
	}); err != nil {
		r.t.Fatal(err)
	}
	for p, content := range files {
		change[p] = content
	}
	tip, err := r.repo.CommitObject(plumbing.NewHash(r.Commit(msg, change)))
	if err != nil {
		r.t.Fatal(err)
	}
	orphan := &object.Commit{Author: tip.Author, Committer: tip.Committer, Message: msg, TreeHash: tip.TreeHash}
	enc := r.repo.Storer.NewEncodedObject()
	if err := orphan.Encode(enc); err != nil {
		r.t.Fatal(err)
	}
	h, err := r.repo.Storer.SetEncodedObject(enc)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := r.repo.Storer.SetReference(plumbing.NewHashReference(head.Name(), h)); err != nil {
		r.t.Fatal(err)
	}
	return h.String()
}

// ReadFiles reads every file below dir into what Repo.Commit takes (paths
// relative to dir, slash-separated). An empty file becomes "\n": an empty
// content means "remove" to Commit.
func ReadFiles(t testing.TB, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if len(b) == 0 {
			b = []byte("\n")
		}
		rel, err := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}
