package git

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"recond.dev/recond/reconcile/source/fetch"
)

// A converged tick asks a local repository where its ref points (Fetch,
// then Moved while a render runs). Opening it with go-git to answer costs
// in proportion to the repository (its config, its object storage, the
// commit's object read to peel it); the ref itself is one small file, or a
// line of packed-refs. So the ref is read here from its files, as go-git
// would find it, and the revision read through go-git is reused while the
// ref names the same object. Whatever this reading does not know how to
// read with certainty (a reftable, a "~" path, a malformed file, a missing
// ref) is left to go-git, whose answer and errors stay those of Fetch.

// racyWindow is how recent a file's modification time may be, at the
// moment it is read, for its cached content to be distrusted: another
// write within the file system's timestamp granularity (up to 2s on FAT,
// 1s on some network file systems) would leave its size, time and inode
// unchanged, a ref being always 41 bytes. Git's racy-git rule, with the
// clock instead of the index's own time.
const racyWindow = 3 * time.Second

// maxSymrefDepth bounds the symbolic refs followed (HEAD → refs/heads/x is
// one); deeper chains are left to go-git.
const maxSymrefDepth = 10

// localRefs reads a local repository's refs from its files, each file read
// again only when its stat changed or was too recent to be trusted, and
// remembers the revision go-git read last with the ref's object then.
type localRefs struct {
	mu     sync.Mutex
	files  map[string]*cachedFile
	packed packedRefs

	// last is the revision go-git read when the ref named tip.
	last struct {
		tip plumbing.Hash
		rev fetch.Revision
	}
}

// cachedFile is a small file as last read: its stat when it was, its
// content and when the reading started.
type cachedFile struct {
	fi      os.FileInfo
	content []byte
	readAt  time.Time
}

// packedRefs is the packed-refs file parsed, with the stat it was read at.
type packedRefs struct {
	fi     os.FileInfo
	readAt time.Time
	refs   map[string]string // ref name → the line's value
}

// unchanged reports whether fi is the file old was read from, unchanged
// since, and old was read late enough after its last write to tell.
func unchanged(old, fi os.FileInfo, readAt time.Time) bool {
	return old != nil && os.SameFile(old, fi) && old.Size() == fi.Size() && old.ModTime().Equal(fi.ModTime()) &&
		old.Mode() == fi.Mode() && readAt.Sub(fi.ModTime()) >= racyWindow
}

// read returns the content of a small file at path: from the cache when
// its stat says it is the same file, unchanged. A missing file is
// os.ErrNotExist.
func (c *localRefs) read(path string) ([]byte, error) {
	start := time.Now()
	fi, err := os.Stat(path)
	if err != nil {
		delete(c.files, path)
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, errors.New(path + " is not a file")
	}
	if f := c.files[path]; f != nil && unchanged(f.fi, fi, f.readAt) {
		return f.content, nil
	}
	// Read after the stat: a write in between leaves a stat that differs
	// from the next one, and the file is read again.
	b, err := os.ReadFile(path)
	if err != nil {
		delete(c.files, path)
		return nil, err
	}
	if c.files == nil {
		c.files = make(map[string]*cachedFile)
	}
	c.files[path] = &cachedFile{fi: fi, content: b, readAt: start}
	return b, nil
}

// packedRef returns the value packed-refs in common gives name: "" when
// it has none (or there is no packed-refs), ok false when it cannot be
// read or parsed.
func (c *localRefs) packedRef(common, name string) (value string, ok bool) {
	path := filepath.Join(common, "packed-refs")
	start := time.Now()
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		c.packed = packedRefs{}
		return "", true
	}
	if err != nil || !fi.Mode().IsRegular() {
		return "", false
	}
	if !unchanged(c.packed.fi, fi, c.packed.readAt) || c.packed.refs == nil {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", false
		}
		refs, ok := parsePackedRefs(b)
		if !ok {
			c.packed = packedRefs{}
			return "", false
		}
		c.packed = packedRefs{fi: fi, readAt: start, refs: refs}
	}
	return c.packed.refs[name], true
}

// parsePackedRefs reads the lines "<sha> <name>" of a packed-refs file;
// comments ("# pack-refs with: ...") and peeled lines ("^<sha>") are
// skipped, as go-git does.
func parsePackedRefs(b []byte) (map[string]string, bool) {
	refs := make(map[string]string)
	for line := range bytes.Lines(b) {
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 || line[0] == '#' || line[0] == '^' {
			continue
		}
		sha, name, ok := bytes.Cut(line, []byte{' '})
		if !ok || !isSHA(string(sha)) || len(name) == 0 {
			return nil, false
		}
		if _, seen := refs[string(name)]; !seen { // go-git takes the first
			refs[string(name)] = string(sha)
		}
	}
	return refs, true
}

// gitDirs finds the git directory of the repository at (or above) path
// and its common directory (a linked worktree's holds the refs and
// objects), as openPlain does: the nearest .git up from path, a directory
// or a file "gitdir: <dir>", else path as a bare repository.
func (c *localRefs) gitDirs(path string) (gitDir, common string, ok bool) {
	if path == "" || strings.HasPrefix(path, "~") {
		return "", "", false
	}
	path, err := filepath.Abs(path)
	if err != nil {
		return "", "", false
	}
	for p := path; ; {
		base := p
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			base = filepath.Dir(p)
		} else if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", "", false
		}
		dot := filepath.Join(base, ".git")
		fi, err := os.Stat(dot)
		switch {
		case err == nil && fi.IsDir():
			gitDir = dot
		case err == nil:
			b, err := c.read(dot)
			if err != nil {
				return "", "", false
			}
			line, _, _ := strings.Cut(string(b), "\n")
			dir, found := strings.CutPrefix(line, "gitdir: ")
			dir = strings.TrimSpace(dir)
			if !found || dir == "" {
				return "", "", false
			}
			if !filepath.IsAbs(dir) {
				dir = filepath.Join(p, dir) // as go-git joins it
			}
			gitDir = dir
		case !errors.Is(err, os.ErrNotExist):
			return "", "", false
		}
		if gitDir != "" {
			break
		}
		parent := filepath.Dir(p)
		if parent == p {
			// No .git above: a bare repository, opened without its
			// commondir as openPlain opens one.
			if fi, err := os.Stat(path); err != nil || !fi.IsDir() {
				return "", "", false
			}
			return path, path, true
		}
		p = parent
	}
	b, err := c.read(filepath.Join(gitDir, "commondir"))
	switch {
	case errors.Is(err, os.ErrNotExist):
		return gitDir, gitDir, true
	case err != nil:
		return "", "", false
	}
	common = strings.TrimSpace(string(b))
	if common == "" {
		return gitDir, gitDir, true
	}
	if !filepath.IsAbs(common) {
		common = filepath.Join(gitDir, common)
	}
	return gitDir, common, true
}

// ref returns the object the reference name points at in the repository,
// its symbolic refs followed: found false when it does not exist; ok
// false when the files cannot tell for certain.
func (c *localRefs) ref(gitDir, common, name string) (h plumbing.Hash, found, ok bool) {
	for range maxSymrefDepth {
		// Where go-git looks (dotgit.RepositoryFilesystem): refs/ in the
		// common directory, HEAD and other pseudo-refs in the worktree's.
		dir := gitDir
		if strings.HasPrefix(name, "refs/") {
			dir = common
		}
		var value string
		b, err := c.read(filepath.Join(dir, filepath.FromSlash(name)))
		switch {
		case err == nil:
			value = strings.TrimSpace(string(b))
			if value == "" {
				return plumbing.ZeroHash, false, false
			}
		case errors.Is(err, os.ErrNotExist):
			v, ok := c.packedRef(common, name)
			if !ok {
				return plumbing.ZeroHash, false, false
			}
			if v == "" {
				return plumbing.ZeroHash, false, true
			}
			value = v
		default:
			return plumbing.ZeroHash, false, false
		}
		if target, sym := strings.CutPrefix(value, "ref: "); sym {
			name = strings.TrimSpace(target)
			continue
		}
		if !isSHA(value) {
			return plumbing.ZeroHash, false, false
		}
		return plumbing.NewHash(value), true, true
	}
	return plumbing.ZeroHash, false, false
}

// tip returns the object the followed ref names now in the local
// repository, read from its files as fetchLocal resolves it with go-git;
// ok false when they cannot tell (go-git then must).
func (c *localRefs) tip(s *Source) (plumbing.Hash, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	gitDir, common, ok := c.gitDirs(s.local)
	if !ok {
		return plumbing.ZeroHash, false
	}
	var names []plumbing.ReferenceName
	switch {
	case s.ref == "" || s.ref == "HEAD":
		names = []plumbing.ReferenceName{plumbing.HEAD}
	case isSHA(s.ref):
		return plumbing.NewHash(s.ref), true
	default:
		names = localCandidates(s.ref)
	}
	for _, name := range names {
		h, found, ok := c.ref(gitDir, common, name.String())
		if !ok {
			return plumbing.ZeroHash, false
		}
		if found {
			return h, true
		}
	}
	return plumbing.ZeroHash, false // not found: go-git says so, its way
}

// localCandidates are the names a ref may stand for in a local repository,
// in the order fetchLocal tries them: a short name may also be a remote's
// branch ("origin/main").
func localCandidates(ref string) []plumbing.ReferenceName {
	names := candidates(ref)
	if len(names) == 2 {
		names = append(names, plumbing.ReferenceName("refs/remotes/"+ref))
	}
	return names
}

// fetchLocal resolves the ref in the local repository: the revision read
// last when the ref still names the same object, else one read through
// go-git (readLocal), remembered when the files agree with it.
func (s *Source) fetchLocal() (fetch.Revision, error) {
	before, ok := s.refs.tip(s)
	if ok {
		s.refs.mu.Lock()
		last := s.refs.last
		s.refs.mu.Unlock()
		if last.tip == before && last.rev.SHA != "" {
			return last.rev, nil
		}
	}
	rev, err := s.readLocal()
	if err != nil || !ok {
		return rev, err
	}
	// Remembered only when the files, before and after go-git's read,
	// name what it found: a ref that moved meanwhile is read again next
	// time.
	if after, ok := s.refs.tip(s); ok && after == before && plumbing.NewHash(rev.Tip) == before {
		s.refs.mu.Lock()
		s.refs.last.tip, s.refs.last.rev = before, rev
		s.refs.mu.Unlock()
	}
	return rev, nil
}

// movedLocal tells whether the local repository's ref names another
// object than tip. The files answer when they say it did not move; a move
// is confirmed by go-git, so that a layout read differently here cannot
// make every render look superseded.
func (s *Source) movedLocal(tip plumbing.Hash) (bool, error) {
	if h, ok := s.refs.tip(s); ok && h == tip {
		return false, nil
	}
	now, err := s.fetchLocal()
	if err != nil {
		return false, WithReason(err)
	}
	return plumbing.NewHash(now.Tip) != tip, nil
}
