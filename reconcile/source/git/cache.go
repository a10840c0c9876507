package git

import (
	"compress/flate"
	"compress/zlib"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"

	"recond.dev/recond/internal/reason"
	"recond.dev/recond/internal/transient"
)

// open opens the repository a render reads from: the local repository, or
// the cache of a remote one (openRepo).
func (s *Source) open() (*git.Repository, error) {
	if s.kind == kindLocal {
		return openRepo(s.local, true)
	}
	return openRepo(s.cache, false)
}

// openRepo opens the repository at dir (found from a path inside it when
// local; else the bare clone of a remote one) for reading. Its large
// objects are streamed when read (see streamLarge), so that looking at an
// object's size never costs its content.
func openRepo(dir string, local bool) (*git.Repository, error) {
	repo, err := openPlain(dir, local)
	if err != nil {
		return nil, err
	}
	return streamLarge(repo)
}

func openPlain(dir string, local bool) (*git.Repository, error) {
	if local {
		repo, err := git.PlainOpenWithOptions(dir, &git.PlainOpenOptions{DetectDotGit: true, EnableDotGitCommonDir: true})
		if errors.Is(err, git.ErrRepositoryNotExists) {
			// DetectDotGit only finds .git directories; try a bare repository.
			if bare, bareErr := git.PlainOpen(dir); bareErr == nil {
				return bare, nil
			}
		}
		return repo, err
	}
	repo, err := git.PlainOpen(dir)
	if errors.Is(err, git.ErrRepositoryNotExists) {
		return nil, fmt.Errorf("no clone cached yet (Fetch first): %w", err)
	}
	return repo, err
}

// CacheDir is the directory of the bare clone of a remote repository, ""
// for a local one.
func (s *Source) CacheDir() string { return s.cache }

// Repository opens the repository a render reads from, as Open does.
func (s *Source) Repository() (*git.Repository, error) { return s.open() }

// openCache opens the bare clone of a remote repository, creating it when
// missing.
func (s *Source) openCache() (*git.Repository, error) {
	repo, err := git.PlainOpen(s.cache)
	if errors.Is(err, git.ErrRepositoryNotExists) {
		// Whatever is at s.cache is not a repository; it is ours to replace.
		if err = os.RemoveAll(s.cache); err == nil {
			if err = os.MkdirAll(filepath.Dir(s.cache), 0o755); err == nil {
				repo, err = git.PlainInit(s.cache, true)
			}
		}
	}
	if err != nil {
		return nil, &cacheError{err}
	}
	return repo, nil
}

// cacheLocks serialises work on one cache directory across Sources.
var cacheLocks sync.Map // string → *sync.RWMutex

func cacheLock(dir string) *sync.RWMutex {
	mu, _ := cacheLocks.LoadOrStore(dir, new(sync.RWMutex))
	return mu.(*sync.RWMutex)
}

// cacheError is a problem with the local clone that starting over may fix.
type cacheError struct{ err error }

func (e *cacheError) Error() string { return "cache: " + e.err.Error() }
func (e *cacheError) Unwrap() error { return e.err }

// brokenCache reports whether err may come from the cached clone (and a
// fresh one may not fail): every error but those of the remote, the network,
// the credentials, a missing ref or a stop. A damaged clone fails in more
// ways than go-git has types for (garbage in a pack is "invalid git object",
// in an index "malformed IDX file", a truncated file io.ErrUnexpectedEOF), so
// what is rebuilt is decided by what is not the clone's: a needless rebuild
// costs one depth-1 clone, a missed one fails every tick forever.
func brokenCache(err error) bool {
	// go-git hides a transport's failure (a *url.Error, a *githttp.Err for
	// a 5xx) in a plumbing.UnexpectedError without Unwrap.
	err = wrapGoGit(err)
	var (
		ce *cacheError
		re *remoteError
		se *reason.Error
	)
	switch {
	case errors.As(err, &ce), errors.Is(err, plumbing.ErrObjectNotFound):
		return true
	case errors.As(err, &re), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, transport.ErrEmptyRemoteRepository), errors.Is(err, errCredentials):
		return false
	}
	r := ReasonOf(err)
	if errors.As(err, &se) {
		r = se.Reason
	}
	switch r {
	case reason.Auth, reason.NotFound, reason.Timeout:
		return false
	case reason.Unavailable:
		// The network's, or the machine's: a full disk is the clone's.
		return transient.Exhausted(err)
	case reason.Other:
		// An HTTP answer that is not Git's: the server's.
		var httpErr *githttp.Err
		return !errors.As(err, &httpErr)
	}
	return true
}

// Failed notes that rendering rev failed for a reason that may be the
// clone's (an object it could not read, which it had not read at fetch):
// the next Fetch clones afresh, once per revision. A local repository is
// only read: nothing to do.
func (s *Source) Failed(rev string) {
	if s.kind == kindLocal {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rebuilt != rev {
		s.suspect = rev
	}
}

// takeSuspect returns the revision to clone afresh for ("" for none) and
// remembers it was.
func (s *Source) takeSuspect() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	sha := s.suspect
	if sha != "" {
		s.suspect, s.rebuilt = "", sha
	}
	return sha
}

// ReadFault reports whether err is go-git failing to read an object of the
// clone (missing, or damaged beyond what its types tell).
func ReadFault(err error) bool {
	msg := err.Error()
	var corrupt flate.CorruptInputError
	return errors.As(err, &corrupt) || errors.Is(err, zlib.ErrChecksum) || errors.Is(err, zlib.ErrHeader) ||
		errors.Is(err, plumbing.ErrObjectNotFound) || errors.Is(err, io.ErrUnexpectedEOF) ||
		strings.Contains(msg, "invalid git object") || strings.Contains(msg, "malformed IDX") ||
		strings.Contains(msg, "zlib: invalid") || strings.Contains(msg, "packfile")
}
