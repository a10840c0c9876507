package render

import (
	"errors"
	"fmt"
	"io"

	"recond.dev/recond/reconcile/source/tree"
)

// ReadFile reads the content of f, the file name of the render, after
// checking its size (from the object's header) against MaxFileBytes and
// what is left of MaxBytes: a file over either is refused unread. The read
// is bounded by that size, so an object longer than its header says is an
// error, not an unbounded read.
func (b *Budget) ReadFile(name string, f tree.File) ([]byte, error) {
	size := f.Size()
	if err := b.fileSize(name, size); err != nil {
		return nil, err
	}
	if err := b.readBytes(name, size); err != nil {
		return nil, err
	}
	rd, err := f.Open()
	if err != nil {
		return nil, &ManifestError{File: name, Err: &ReadError{Err: fmt.Errorf("read: %w", err)}}
	}
	defer rd.Close()
	data := make([]byte, size)
	if _, err := io.ReadFull(rd, data); err != nil {
		return nil, &ManifestError{File: name, Err: &ReadError{Err: fmt.Errorf("read: %w", err)}}
	}
	// Past the size, a whole object ends (io.EOF); one whose size field
	// lies goes on, or (go-git's bounded reader of large objects) says so
	// with an error: either is a damaged object, never a shorter file.
	if n, err := io.ReadFull(rd, make([]byte, 1)); n > 0 || !errors.Is(err, io.EOF) {
		return nil, &ManifestError{File: name, Err: &ReadError{Err: fmt.Errorf("read: object does not end at its size (%v)", err)}}
	}
	return data, nil
}
