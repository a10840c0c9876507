package fetch

import (
	"fmt"
	"time"

	"recond.dev/recond/reconcile/source/tree"
)

// Tree is one revision's files, opened for rendering, with what a render
// needs to know of the revision besides its files. Close it once the
// render is done.
type Tree struct {
	// Rev is the revision, as the source spells it (a commit SHA in lower
	// case, a digest).
	Rev string
	// Root is the revision's root, Dir the configured directory in it, at
	// Path ("." or a slash-separated path below Root).
	Root, Dir tree.Dir
	Path      string
	// Time is when the revision was made (a commit's committer date, an
	// artifact's creation): a chart's render reads it as "now". Zero when
	// the source does not know it.
	Time time.Time
	// Reopen is how a render worker opens the same tree in its own
	// process.
	Reopen Location
	// Unlock releases what the source holds while the tree is read (the
	// cache's read lock), nil for nothing; Close calls it.
	Unlock func()
}

// Close releases what the source holds while the tree is read.
func (t *Tree) Close() {
	if t != nil && t.Unlock != nil {
		t.Unlock()
		t.Unlock = nil
	}
}

// Location is where a source keeps a revision's files on disk, for a
// render worker to open them again: Source names the kind of source whose
// Open reads them (the source facade's table of kinds lists each), Path is
// the directory it reads, and Local tells that Path is the user's own
// (a local repository, found from a path inside it), not a cache the
// source made.
type Location struct {
	Source string `json:"source"`
	Path   string `json:"path"`
	Local  bool   `json:"local,omitempty"`
}

// RevisionError is a revision that has not the form of the source's
// revisions (a full commit SHA, a sha256: digest): Open refuses it
// before reading anything.
type RevisionError struct {
	Rev string
	// Want says what a revision of the source is.
	Want string
}

func (e *RevisionError) Error() string { return fmt.Sprintf("%q is not %s", e.Rev, e.Want) }
