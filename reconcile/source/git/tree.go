package git

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"recond.dev/recond/reconcile/source/fetch"
	"recond.dev/recond/reconcile/source/manifest"
	"recond.dev/recond/reconcile/source/tree"
)

// Name names the kind of source in a fetch.Location.
const Name = "git"

// Open opens the tree of commit rev (a full commit SHA), read straight
// from the repository (no checkout). For a remote repository the commit
// must be in the cache (Fetch returned it), and the cache stays locked
// for reading until the tree is closed.
func (s *Source) Open(rev string) (*fetch.Tree, error) {
	if !isSHA(rev) {
		return nil, &fetch.RevisionError{Rev: rev, Want: "a full commit SHA"}
	}
	rev = strings.ToLower(rev)
	loc := fetch.Location{Source: Name, Path: s.local, Local: true}
	var unlock func()
	if s.kind != kindLocal {
		loc = fetch.Location{Source: Name, Path: s.cache}
		mu := cacheLock(s.cache)
		mu.RLock()
		unlock = mu.RUnlock
	}
	t, err := Open(loc, rev, s.dir, manifest.Limits{})
	if err != nil {
		if unlock != nil {
			unlock()
		}
		return nil, err
	}
	t.Unlock = unlock
	return t, nil
}

// Open opens the tree of commit rev in the repository at loc (opened as
// Source.Open opens it: a render worker opens its tree with it), and dir
// in it (a cleaned path, "." for the root). lim is not read: a commit's
// files are read lazily, under the render's own budget.
func Open(loc fetch.Location, rev, dir string, _ manifest.Limits) (*fetch.Tree, error) {
	repo, err := openRepo(loc.Path, loc.Local)
	if err != nil {
		return nil, err
	}
	commit, err := repo.CommitObject(plumbing.NewHash(rev))
	if err != nil {
		return nil, fmt.Errorf("commit %s: %w", rev, err)
	}
	root, err := commit.Tree()
	if err != nil {
		return nil, fmt.Errorf("commit %s: %w", rev, err)
	}
	sub := root
	if dir != "." {
		if sub, err = root.Tree(dir); err != nil {
			if errors.Is(err, object.ErrDirectoryNotFound) {
				return nil, &manifest.ManifestError{File: dir, Err: err}
			}
			return nil, fmt.Errorf("%s: %w", dir, err)
		}
	}
	return &fetch.Tree{Rev: rev, Root: gitDir{root}, Dir: gitDir{sub}, Path: dir,
		Time: commit.Committer.When.UTC(), Reopen: loc}, nil
}

// Dir presents a Git tree as a tree.Dir, as Open presents a commit's.
func Dir(t *object.Tree) tree.Dir { return gitDir{t} }

// File presents a blob as a tree.File, as a Dir's File does.
func File(f *object.File) tree.File { return gitFile{f} }

// gitDir is a Git tree as a tree.Dir.
type gitDir struct{ t *object.Tree }

func gitKind(m filemode.FileMode) tree.EntryKind {
	switch {
	case m == filemode.Dir:
		return tree.KindDir
	case m == filemode.Symlink:
		return tree.KindSymlink
	case m.IsFile():
		return tree.KindFile
	}
	return tree.KindOther
}

func (d gitDir) Entries() []tree.Entry {
	out := make([]tree.Entry, len(d.t.Entries))
	for i, e := range d.t.Entries {
		out[i] = tree.Entry{Name: e.Name, Kind: gitKind(e.Mode)}
	}
	return out
}

func (d gitDir) Entry(name string) (tree.Entry, error) {
	e, err := d.t.FindEntry(name)
	if err != nil {
		return tree.Entry{}, fmt.Errorf("%s: %w", name, fs.ErrNotExist)
	}
	return tree.Entry{Name: e.Name, Kind: gitKind(e.Mode)}, nil
}

func (d gitDir) Dir(name string) (tree.Dir, error) {
	t, err := d.t.Tree(name)
	if err != nil {
		if errors.Is(err, object.ErrDirectoryNotFound) {
			return nil, fmt.Errorf("%s: %w", name, fs.ErrNotExist)
		}
		return nil, err
	}
	return gitDir{t}, nil
}

func (d gitDir) File(name string) (tree.File, error) {
	e, err := d.t.FindEntry(name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, fs.ErrNotExist)
	}
	f, err := d.t.TreeEntryFile(e)
	if err != nil {
		return nil, err
	}
	return gitFile{f}, nil
}

// gitFile is a blob as a tree.File.
type gitFile struct{ f *object.File }

func (f gitFile) Size() int64                  { return f.f.Size }
func (f gitFile) Open() (io.ReadCloser, error) { return f.f.Reader() }
