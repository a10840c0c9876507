package source

import (
	"errors"
	"fmt"
	"io"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// largeObject is the size above which an object of the repository Render
// reads is streamed from disk when read, instead of being inflated whole
// into memory as soon as it is looked up. go-git's default loads every
// blob it is asked for, before anyone can look at its size: a tree of many
// large files then cost their whole size in memory even when the render
// limits refuse the first of them.
const largeObject = 256 << 10

// objectCacheBytes bounds go-git's object cache for one render (go-git's
// default is 96 MiB). Only objects up to largeObject are cached.
const objectCacheBytes = 16 << 20

// streamLarge returns repo reopened on the same .git directory with
// objects above largeObject read lazily: looking one up reads its header
// (type and size) only. It is meant for reading, not fetching.
func streamLarge(repo *git.Repository) (*git.Repository, error) {
	fs, ok := repo.Storer.(*filesystem.Storage)
	if !ok {
		return repo, nil
	}
	st := filesystem.NewStorageWithOptions(fs.Filesystem(), cache.NewObjectLRU(objectCacheBytes),
		filesystem.Options{LargeObjectThreshold: largeObject})
	r, err := git.Open(st, nil)
	if err != nil {
		return nil, fmt.Errorf("open objects: %w", err)
	}
	return r, nil
}

// objectReadError is the clone failing to give an object's content (missing,
// damaged): not the commit's fault, so the next Fetch clones afresh.
type objectReadError struct{ err error }

func (e *objectReadError) Error() string { return e.err.Error() }
func (e *objectReadError) Unwrap() error { return e.err }

// readFile reads the content of f, the file name of the render, after
// checking its size (from the object's header) against MaxFileBytes and
// what is left of MaxBytes: a file over either is refused unread. The read
// is bounded by that size, so an object longer than its header says is an
// error, not an unbounded read.
func (b *budget) readFile(name string, f File) ([]byte, error) {
	size := f.Size()
	if err := b.fileSize(name, size); err != nil {
		return nil, err
	}
	if err := b.readBytes(name, size); err != nil {
		return nil, err
	}
	rd, err := f.Open()
	if err != nil {
		return nil, &ManifestError{File: name, Err: &objectReadError{fmt.Errorf("read: %w", err)}}
	}
	defer rd.Close()
	data := make([]byte, size)
	if _, err := io.ReadFull(rd, data); err != nil {
		return nil, &ManifestError{File: name, Err: &objectReadError{fmt.Errorf("read: %w", err)}}
	}
	// Past the size, a whole object ends (io.EOF); one whose size field
	// lies goes on, or (go-git's bounded reader of large objects) says so
	// with an error: either is a damaged object, never a shorter file.
	if n, err := io.ReadFull(rd, make([]byte, 1)); n > 0 || !errors.Is(err, io.EOF) {
		return nil, &ManifestError{File: name, Err: &objectReadError{fmt.Errorf("read: object does not end at its size (%v)", err)}}
	}
	return data, nil
}
