package git

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
)

// A quiet Fetch of a remote repository lists its refs and finds the
// commit the ref names already in the clone. Reading that commit through
// go-git loads the index of every pack of the clone, in proportion to the
// repository; so the commit a tip peeled to is remembered with the stat of
// the clone's object files then, and reused while they are the same files.
// Fetch holds the clone's lock meanwhile: nothing of this process changes
// them underneath; a clone removed or fetched into has other files.

// peeledTip is the commit a tip of a clone peeled to, and the signature of
// the clone's object files (objectFiles) when it did.
type peeledTip struct {
	tip, commit plumbing.Hash
	files       string
}

var peeledTips sync.Map // clone directory → peeledTip

// peelCached is peel in the clone at dir, answered from the last peel of
// the same tip while the clone's object files are unchanged. The caller
// holds the clone's lock.
func peelCached(dir string, repo *git.Repository, h plumbing.Hash) (plumbing.Hash, error) {
	files, ok := objectFiles(dir, h)
	if ok {
		if p, found := peeledTips.Load(dir); found {
			if p := p.(peeledTip); p.tip == h && p.files == files {
				return p.commit, nil
			}
		}
	}
	c, err := peel(repo, h)
	if err != nil || !ok {
		peeledTips.Delete(dir)
		return c, err
	}
	peeledTips.Store(dir, peeledTip{tip: h, commit: c, files: files})
	return c, nil
}

// objectFiles describes the clone's packs (their names, which are the
// hash of their content, sizes and times) and the loose object h, if
// there is one: what peel read h from. ok false when the packs' directory
// cannot be read.
func objectFiles(dir string, h plumbing.Hash) (string, bool) {
	entries, err := os.ReadDir(filepath.Join(dir, "objects", "pack"))
	if err != nil {
		return "", false
	}
	var b strings.Builder
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			return "", false
		}
		b.WriteString(e.Name())
		b.WriteByte(' ')
		b.WriteString(strconv.FormatInt(fi.Size(), 10))
		b.WriteByte(' ')
		b.WriteString(strconv.FormatInt(fi.ModTime().UnixNano(), 10))
		b.WriteByte('\n')
	}
	hex := h.String()
	if fi, err := os.Stat(filepath.Join(dir, "objects", hex[:2], hex[2:])); err == nil {
		b.WriteString("loose ")
		b.WriteString(strconv.FormatInt(fi.Size(), 10))
		b.WriteByte(' ')
		b.WriteString(strconv.FormatInt(fi.ModTime().UnixNano(), 10))
	}
	return b.String(), true
}
