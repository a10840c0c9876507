package tree

import (
	"bytes"
	"io"
)

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

// MaxLinkTarget bounds the length of a symbolic link's target (Linux's
// PATH_MAX): a link's target is a path, and one longer than any path is
// refused unread.
const MaxLinkTarget = 4096

// ReadAll returns a small file's content (a link's target), bounded by
// its size.
func ReadAll(f File) (string, error) {
	rd, err := f.Open()
	if err != nil {
		return "", err
	}
	defer rd.Close()
	b, err := io.ReadAll(io.LimitReader(rd, f.Size()))
	return string(b), err
}

// Bytes is a File held in memory: a file's content, or a symbolic link's
// target.
type Bytes []byte

// Size implements File.
func (b Bytes) Size() int64 { return int64(len(b)) }

// Open implements File.
func (b Bytes) Open() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
