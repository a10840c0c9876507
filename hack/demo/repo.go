package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// demoRepo is the demo's Git repository, written with go-git.
type demoRepo struct {
	dir  string
	repo *git.Repository
}

func newRepo(dir, examples string) (*demoRepo, error) {
	r, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{InitOptions: git.InitOptions{DefaultBranch: "refs/heads/main"}})
	if err != nil {
		return nil, err
	}
	files := map[string]func(string) string{}
	err = filepath.WalkDir(examples, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(examples, p)
		content := string(b)
		files[filepath.ToSlash(rel)] = func(string) string { return content }
		return err
	})
	if err != nil {
		return nil, err
	}
	d := &demoRepo{dir: dir, repo: r}
	_, err = d.edit("the demo app", files)
	return d, err
}

func (d *demoRepo) head() string {
	h, err := d.repo.Head()
	if err != nil {
		return strings.Repeat("?", 40)
	}
	return h.Hash().String()
}

func (d *demoRepo) edit(msg string, files map[string]func(string) string) (string, error) {
	wt, err := d.repo.Worktree()
	if err != nil {
		return "", err
	}
	for name, f := range files {
		p := filepath.Join(d.dir, name)
		old, err := os.ReadFile(p)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, []byte(f(string(old))), 0o644); err != nil {
			return "", err
		}
		if _, err := wt.Add(name); err != nil {
			return "", err
		}
	}
	return d.commit(wt, msg)
}

// remove deletes the files names in one commit.
func (d *demoRepo) remove(msg string, names ...string) (string, error) {
	wt, err := d.repo.Worktree()
	if err != nil {
		return "", err
	}
	for _, name := range names {
		if _, err := wt.Remove(name); err != nil {
			return "", err
		}
	}
	return d.commit(wt, msg)
}

func (d *demoRepo) commit(wt *git.Worktree, msg string) (string, error) {
	h, err := wt.Commit(msg, &git.CommitOptions{Author: &object.Signature{Name: "demo", Email: "demo@recond.dev", When: time.Now()}})
	if err != nil {
		return "", err
	}
	return h.String(), nil
}
