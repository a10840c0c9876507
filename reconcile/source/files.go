package source

import (
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"recond.dev/recond/reconcile/source/tree"
)

// A revision's files reach the renderers through Dir and File only
// (package tree): this is the seam between where a revision comes from (a
// Git commit's tree here; any other source provides the same two
// interfaces) and how its files become objects (plain YAML and JSON,
// kustomize, Helm).

// Dir, File and their kinds are package tree's.
type (
	Dir       = tree.Dir
	File      = tree.File
	Entry     = tree.Entry
	EntryKind = tree.EntryKind
)

// The kinds of entries.
const (
	KindFile    = tree.KindFile
	KindDir     = tree.KindDir
	KindSymlink = tree.KindSymlink
	KindOther   = tree.KindOther
)

// maxSymlinkTarget bounds the length of a symbolic link's target.
const maxSymlinkTarget = tree.MaxLinkTarget

// gitDir is a Git tree as a Dir.
type gitDir struct{ t *object.Tree }

func gitKind(m filemode.FileMode) EntryKind {
	switch {
	case m == filemode.Dir:
		return KindDir
	case m == filemode.Symlink:
		return KindSymlink
	case m.IsFile():
		return KindFile
	}
	return KindOther
}

func (d gitDir) Entries() []Entry {
	out := make([]Entry, len(d.t.Entries))
	for i, e := range d.t.Entries {
		out[i] = Entry{Name: e.Name, Kind: gitKind(e.Mode)}
	}
	return out
}

func (d gitDir) Entry(name string) (Entry, error) {
	e, err := d.t.FindEntry(name)
	if err != nil {
		return Entry{}, fmt.Errorf("%s: %w", name, fs.ErrNotExist)
	}
	return Entry{Name: e.Name, Kind: gitKind(e.Mode)}, nil
}

func (d gitDir) Dir(name string) (Dir, error) {
	t, err := d.t.Tree(name)
	if err != nil {
		if errors.Is(err, object.ErrDirectoryNotFound) {
			return nil, fmt.Errorf("%s: %w", name, fs.ErrNotExist)
		}
		return nil, err
	}
	return gitDir{t}, nil
}

func (d gitDir) File(name string) (File, error) {
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

// gitFile is a blob as a File.
type gitFile struct{ f *object.File }

func (f gitFile) Size() int64                  { return f.f.Size }
func (f gitFile) Open() (io.ReadCloser, error) { return f.f.Reader() }

// FSDir presents a directory of fsys (the root: ".") as a Dir (tree.FSDir).
func FSDir(fsys fs.FS) Dir { return tree.FSDir(fsys) }
