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

	"github.com/ProtonMail/go-crypto/openpgp"
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
	opts RepoOptions
	when time.Time // the date of the last commit or tag, with Epoch
}

// RepoOptions shapes a Repo: where it is, its default branch, who makes its
// commits and when, and what a commit stages.
type RepoOptions struct {
	// Dir is the work tree; "" for a temporary directory of the test.
	Dir string
	// Branch is the default branch; "" for main.
	Branch string
	// Author is the name commits and annotated tags are made by
	// (test@example.com); "" for test.
	Author string
	// Epoch, when set, dates the n-th commit or tag n minutes after it, so
	// that the same commits have the same SHAs at every run; otherwise
	// they are dated now.
	Epoch time.Time
	// StageAll makes a commit stage everything in the work tree (links and
	// files the test wrote there itself), not only the files it is given.
	StageAll bool
}

// NewRepo creates an empty repository whose default branch is main.
func NewRepo(t testing.TB) *Repo {
	t.Helper()
	return NewRepoWith(t, RepoOptions{})
}

// NewRepoWith creates an empty repository shaped by opts.
func NewRepoWith(t testing.TB, opts RepoOptions) *Repo {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	if opts.Branch == "" {
		opts.Branch = "main"
	}
	r, err := git.PlainInitWithOptions(opts.Dir, &git.PlainInitOptions{
		InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName(opts.Branch)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &Repo{t: t, Dir: opts.Dir, repo: r, opts: opts, when: opts.Epoch}
}

// OpenRepo is the repository already at dir (a work tree), committing as
// NewRepo's do.
func OpenRepo(t testing.TB, dir string) *Repo {
	t.Helper()
	r, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	return &Repo{t: t, Dir: dir, repo: r}
}

// URL is the repository as a file:// URL.
func (r *Repo) URL() string { return "file://" + r.Dir }

// Git is the go-git repository, for what Repo does not do itself.
func (r *Repo) Git() *git.Repository { return r.repo }

// Signature is the author (and date) of the next commit or tag.
func (r *Repo) Signature() *object.Signature {
	name := r.opts.Author
	if name == "" {
		name = "test"
	}
	when := time.Now()
	if !r.opts.Epoch.IsZero() {
		r.when = r.when.Add(time.Minute)
		when = r.when
	}
	return &object.Signature{Name: name, Email: "test@example.com", When: when}
}

// Commit writes files (path -> content; an empty content removes the file)
// and commits them, returning the commit SHA.
func (r *Repo) Commit(msg string, files map[string]string) string {
	r.t.Helper()
	return r.CommitSigned(msg, nil, files)
}

// CommitSigned is Commit signed with key (OpenPGP; unsigned when nil).
func (r *Repo) CommitSigned(msg string, key *openpgp.Entity, files map[string]string) string {
	r.t.Helper()
	wt, err := r.repo.Worktree()
	if err != nil {
		r.t.Fatal(err)
	}
	for p, content := range files {
		full := filepath.Join(r.Dir, filepath.FromSlash(p))
		if content == "" {
			if r.opts.StageAll {
				err = os.Remove(full)
			} else {
				_, err = wt.Remove(p)
			}
			if err != nil {
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
		if r.opts.StageAll {
			continue
		}
		if _, err := wt.Add(p); err != nil {
			r.t.Fatal(err)
		}
	}
	if r.opts.StageAll {
		if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
			r.t.Fatal(err)
		}
	}
	h, err := wt.Commit(msg, &git.CommitOptions{AllowEmptyCommits: true, Author: r.Signature(), SignKey: key})
	if err != nil {
		r.t.Fatal(err)
	}
	return h.String()
}

// Tag tags the commit sha name, lightweight or annotated ("release NAME"),
// and returns the hash the tag's ref points at (the tag object's, when
// annotated).
func (r *Repo) Tag(name, sha string, annotated bool) string {
	r.t.Helper()
	var opts *git.CreateTagOptions
	if annotated {
		opts = &git.CreateTagOptions{Tagger: r.Signature(), Message: "release " + name}
	}
	ref, err := r.repo.CreateTag(name, plumbing.NewHash(sha), opts)
	if err != nil {
		r.t.Fatalf("tag %s: %v", name, err)
	}
	return ref.Hash().String()
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
