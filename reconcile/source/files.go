package source

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// A revision's files reach the renderers through Dir and File only: this
// is the seam between where a revision comes from (a Git commit's tree
// here; any other source provides the same two interfaces) and how its
// files become objects (plain YAML and JSON, kustomize, Helm). Renderers
// never see the source's own types, so every renderer runs over every
// source under the same bounds, link rules and sealing.

// Dir is one directory of a revision's files.
type Dir interface {
	// Entries lists the directory, sorted by name.
	Entries() []Entry
	// Entry returns the entry called name, or an error matching
	// fs.ErrNotExist.
	Entry(name string) (Entry, error)
	// Dir opens the subdirectory called name.
	Dir(name string) (Dir, error)
	// File opens the file or symbolic link called name (a link's content
	// is its target).
	File(name string) (File, error)
}

// EntryKind is what a directory entry is.
type EntryKind uint8

// The kinds of entries.
const (
	KindFile EntryKind = iota
	KindDir
	KindSymlink
	// KindOther is anything else (a Git submodule): never read.
	KindOther
)

// Entry is one name in a Dir.
type Entry struct {
	Name string
	Kind EntryKind
}

// File is a file's content, whose size is known before it is read (the
// render's limits refuse a file over them unread).
type File interface {
	Size() int64
	// Open reads the content; a reader that goes on past Size is a
	// damaged source, not a longer file.
	Open() (io.ReadCloser, error)
}

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

// readAll returns a small file's content (a link's target), bounded by
// its size.
func readAll(f File) (string, error) {
	rd, err := f.Open()
	if err != nil {
		return "", err
	}
	defer rd.Close()
	b, err := io.ReadAll(io.LimitReader(rd, f.Size()))
	return string(b), err
}

// FSDir presents a directory of fsys (the root: ".") as a Dir: how a
// source whose revision is a file tree of its own (an unpacked artifact)
// reaches the renderers. Symbolic links are read with fs.ReadLink when
// fsys implements fs.ReadLinkFS; otherwise it has none.
func FSDir(fsys fs.FS) Dir { return fsDir{fsys: fsys, at: "."} }

type fsDir struct {
	fsys fs.FS
	at   string
}

func fsKind(m fs.FileMode) EntryKind {
	switch {
	case m.IsDir():
		return KindDir
	case m&fs.ModeSymlink != 0:
		return KindSymlink
	case m.IsRegular():
		return KindFile
	}
	return KindOther
}

func (d fsDir) Entries() []Entry {
	es, _ := fs.ReadDir(d.fsys, d.at) // sorted by name; unreadable: empty
	out := make([]Entry, 0, len(es))
	for _, e := range es {
		out = append(out, Entry{Name: e.Name(), Kind: fsKind(e.Type())})
	}
	return out
}

func (d fsDir) Entry(name string) (Entry, error) {
	fi, err := lstat(d.fsys, path.Join(d.at, name))
	if err != nil {
		return Entry{}, err
	}
	return Entry{Name: name, Kind: fsKind(fi.Mode())}, nil
}

func lstat(fsys fs.FS, name string) (fs.FileInfo, error) {
	if rl, ok := fsys.(fs.ReadLinkFS); ok {
		return rl.Lstat(name)
	}
	return fs.Stat(fsys, name)
}

func (d fsDir) Dir(name string) (Dir, error) {
	p := path.Join(d.at, name)
	fi, err := lstat(d.fsys, p)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s: not a directory: %w", name, fs.ErrNotExist)
	}
	return fsDir{fsys: d.fsys, at: p}, nil
}

func (d fsDir) File(name string) (File, error) {
	p := path.Join(d.at, name)
	fi, err := lstat(d.fsys, p)
	if err != nil {
		return nil, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, err := fs.ReadLink(d.fsys, p)
		if err != nil {
			return nil, err
		}
		return linkFile(target), nil
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a file", name)
	}
	return fsFile{fsys: d.fsys, name: p, size: fi.Size()}, nil
}

type fsFile struct {
	fsys fs.FS
	name string
	size int64
}

func (f fsFile) Size() int64                  { return f.size }
func (f fsFile) Open() (io.ReadCloser, error) { return f.fsys.Open(f.name) }

// linkFile is a symbolic link's target as a File.
type linkFile string

func (l linkFile) Size() int64 { return int64(len(l)) }
func (l linkFile) Open() (io.ReadCloser, error) {
	return io.NopCloser(strings.NewReader(string(l))), nil
}
