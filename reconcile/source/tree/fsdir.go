package tree

import (
	"fmt"
	"io"
	"io/fs"
	"path"
)

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
		return Bytes(target), nil
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
