package git

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/memory"

	"recond.dev/recond/reconcile/source/fetch"
)

// Options say where a Git source's manifests live and how to reach them
// (the source facade's Config, as far as Git reads it).
type Options struct {
	// URL is a local path, a file:// URL, an https:// (or http://) URL, an
	// ssh:// URL or an scp-like address such as git@host:org/repo.git. A
	// local path may point inside a worktree; the repository is found by
	// walking up to its .git.
	URL string
	// Ref is a branch, a tag, a full reference name ("refs/...") or a full
	// 40-hex commit SHA. "" means the remote HEAD (the default branch), or
	// the checked-out HEAD of a local repository.
	Ref string
	// Path is the directory inside the repository holding the manifests.
	Path string
	// CacheDir is where clones of remote repositories are kept between
	// fetches. It is required for remote URLs.
	CacheDir string

	// Username, PasswordFile and TokenFile configure HTTPS basic auth,
	// read at every fetch; SSHKeyFile, KnownHostsFile and
	// InsecureSkipHostKeyCheck SSH (see the source facade's Config).
	Username, PasswordFile, TokenFile string
	SSHKeyFile, KnownHostsFile        string
	InsecureSkipHostKeyCheck          bool

	// VerifyCommits refuses a revision whose commit (or, when Ref names a
	// tag, whose annotated tag) is not signed by a key of TrustedKeysFile
	// (armored OpenPGP public keys and SSH keys as allowed-signers lines,
	// read at every fetch): checked at every Fetch, cached or not, still
	// under the clone's lock, so that a revision refused once stays
	// refused (verify.go).
	VerifyCommits   bool
	TrustedKeysFile string
}

type kind int

const (
	kindLocal kind = iota
	kindHTTP
	kindSSH
)

// Source reads one repository at one ref. Its methods are safe for
// concurrent use.
type Source struct {
	cfg     Options
	kind    kind
	ref     string // validated Options.Ref
	dir     string // cleaned Options.Path: "." or a slash-separated relative path
	local   string // repository path, for kindLocal
	remote  string // URL given to go-git: never contains a password
	display string // remote without its query and fragment (displayURL)
	// hidden are the parts of remote that display drops (a query's
	// "private_token=..."), removed from every error of a fetch (scrub).
	hidden []string

	urlUser, urlPassword string // credentials found in an http(s) URL
	sshUser, sshAddr     string // ssh login and host:port (for known_hosts)

	cache string // bare clone for remote sources: CacheDir/<hash of remote>

	// suspect is a revision whose render failed for a reason that may be
	// the clone's (a damaged object it had not read at fetch), to be
	// cloned afresh by the next Fetch; rebuilt is the last one that was,
	// so that a commit that is bad in itself costs one fresh clone only.
	mu               sync.Mutex
	suspect, rebuilt string

	refs localRefs // a local repository's refs read from its files (refs.go)
}

// New validates o and returns a Source. It does not touch the network or
// the disk.
func New(o Options) (*Source, error) {
	s := &Source{cfg: o}
	if err := s.parseURL(o.URL); err != nil {
		return nil, err
	}
	var err error
	if s.ref, err = checkRef(o.Ref); err != nil {
		return nil, err
	}
	if s.dir, err = fetch.CleanPath(o.Path); err != nil {
		return nil, err
	}

	httpAuth := o.Username != "" || o.PasswordFile != "" || o.TokenFile != ""
	sshAuth := o.SSHKeyFile != "" || o.KnownHostsFile != "" || o.InsecureSkipHostKeyCheck
	switch s.kind {
	case kindLocal:
		if httpAuth || sshAuth {
			return nil, fmt.Errorf("source %s: credentials and host keys are not used for a local repository", s.display)
		}
		return s, nil
	case kindHTTP:
		if sshAuth {
			return nil, fmt.Errorf("source %s: SSH key and host key settings apply only to ssh URLs", s.display)
		}
		if o.PasswordFile != "" && o.TokenFile != "" {
			return nil, fmt.Errorf("source %s: set a password file or a token file, not both", s.display)
		}
	case kindSSH:
		if o.PasswordFile != "" || o.TokenFile != "" {
			return nil, fmt.Errorf("source %s: password and token files apply only to https URLs; use an SSH key", s.display)
		}
		if o.KnownHostsFile == "" && !o.InsecureSkipHostKeyCheck {
			return nil, fmt.Errorf("source %s: ssh needs a known_hosts file to verify the server: set KnownHostsFile "+
				"(for example from `ssh-keyscan %s`), or set InsecureSkipHostKeyCheck to accept any host key",
				s.display, hostOnly(s.sshAddr))
		}
		if o.KnownHostsFile != "" && o.InsecureSkipHostKeyCheck {
			return nil, fmt.Errorf("source %s: set KnownHostsFile or InsecureSkipHostKeyCheck, not both", s.display)
		}
		if s.sshUser == "" {
			s.sshUser = o.Username
		}
		if s.sshUser == "" {
			s.sshUser = "git"
		}
	}
	if o.CacheDir == "" {
		return nil, fmt.Errorf("source %s: a cache directory is required for a remote repository", s.display)
	}
	sum := sha256.Sum256([]byte(s.remote))
	s.cache = filepath.Join(o.CacheDir, hex.EncodeToString(sum[:12]))
	return s, nil
}

// Fetch resolves the configured ref to a commit and returns its SHA.
//
// A local repository is only read. For a remote one, Fetch lists the remote
// refs and fetches (depth 1, that ref only) unless the commit the ref
// points at is already cached, which is the case when the ref has not
// moved since the previous Fetch; Revision.Fetched tells which happened. A
// ref that is a commit SHA needs no network once cached. A missing ref
// gives an error matching plumbing.ErrReferenceNotFound; go-git's transport
// errors (transport.ErrAuthenticationRequired, ...) and network errors
// (*url.Error, *net.OpError) stay reachable through errors.Is and As.
func (s *Source) Fetch(ctx context.Context) (fetch.Revision, error) {
	if err := ctx.Err(); err != nil {
		return fetch.Revision{}, fmt.Errorf("fetch %s: %w", s.display, err)
	}
	var rev fetch.Revision
	var err error
	if s.kind == kindLocal {
		rev, err = s.fetchLocal()
	} else {
		mu := cacheLock(s.cache)
		mu.Lock()
		defer mu.Unlock()
		if sha := s.takeSuspect(); sha != "" {
			// The clone's objects of sha could not all be read: start over.
			_ = os.RemoveAll(s.cache)
		}
		rev, err = s.fetchChecked(ctx)
		if err != nil && ctx.Err() == nil && brokenCache(err) {
			// Shallow clones updated in place occasionally end up missing
			// objects, and a disk or a cleaner can damage any file of the
			// clone; a fresh clone is cheap at depth 1.
			if rmErr := os.RemoveAll(s.cache); rmErr == nil {
				rev, err = s.fetchChecked(ctx)
			}
		}
	}
	if err != nil {
		return fetch.Revision{}, fmt.Errorf("fetch %s: %w", s.display, WithReason(s.scrub(wrapGoGit(err))))
	}
	// Verified on every Fetch, cached or not, still under the cache lock:
	// a revision refused once stays refused.
	if s.cfg.VerifyCommits {
		if err := s.verify(rev); err != nil {
			return fetch.Revision{}, fmt.Errorf("fetch %s: %w", s.display, err)
		}
	}
	return rev, nil
}

// readLocal resolves the ref in the local repository with go-git (see
// fetchLocal, which reads it only when the ref moved).
func (s *Source) readLocal() (fetch.Revision, error) {
	repo, err := s.open()
	if err != nil {
		return fetch.Revision{}, err
	}
	var h plumbing.Hash
	switch {
	case s.ref == "":
		head, err := repo.Head()
		if err != nil {
			return fetch.Revision{}, fmt.Errorf("HEAD: %w", err)
		}
		h = head.Hash()
	case isSHA(s.ref):
		h = plumbing.NewHash(s.ref)
	default:
		names := candidates(s.ref)
		if len(names) == 2 { // a short name: locally it may also be "origin/main"
			names = append(names, plumbing.ReferenceName("refs/remotes/"+s.ref))
		}
		found := false
		for _, name := range names {
			ref, err := repo.Reference(name, true)
			if errors.Is(err, plumbing.ErrReferenceNotFound) {
				continue
			}
			if err != nil {
				return fetch.Revision{}, fmt.Errorf("ref %q: %w", s.ref, err)
			}
			h, found = ref.Hash(), true
			break
		}
		if !found {
			return fetch.Revision{}, refNotFound(s.ref)
		}
	}
	c, err := peel(repo, h)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return fetch.Revision{}, fmt.Errorf("%w: %w", refNotFound(s.ref), err)
	}
	if err != nil {
		return fetch.Revision{}, err
	}
	return fetch.Revision{SHA: c.String(), Tip: h.String()}, nil
}

// fetchChecked is fetchRemote, then, after a fetch, a read of the revision's commit and root
// tree through a clone opened afresh, as Render will read it: a damaged pack
// or index that the fetching Repository did not need (it held the objects in
// memory) is found here, where the clone can still be rebuilt.
func (s *Source) fetchChecked(ctx context.Context) (fetch.Revision, error) {
	rev, err := s.fetchRemote(ctx)
	if err != nil || !rev.Fetched {
		// Not fetched: the revision was read from the clone just now.
		return rev, err
	}
	repo, err := git.PlainOpen(s.cache)
	if err != nil {
		return fetch.Revision{}, &cacheError{fmt.Errorf("reopen: %w", err)}
	}
	c, err := repo.CommitObject(plumbing.NewHash(rev.SHA))
	if err == nil {
		_, err = c.Tree()
	}
	if err != nil {
		return fetch.Revision{}, &cacheError{fmt.Errorf("read commit %s: %w", rev.SHA, err)}
	}
	return rev, nil
}

func (s *Source) fetchRemote(ctx context.Context) (fetch.Revision, error) {
	repo, err := s.openCache()
	if err != nil {
		return fetch.Revision{}, err
	}
	auth, err := s.auth()
	if err != nil {
		return fetch.Revision{}, err
	}
	remote := git.NewRemote(repo.Storer, &config.RemoteConfig{Name: "origin", URLs: []string{s.remote}})
	if isSHA(s.ref) {
		return s.fetchCommit(ctx, repo, remote, auth)
	}

	refs, err := remote.ListContext(ctx, &git.ListOptions{Auth: auth})
	if err != nil {
		// Listing writes nothing locally: whatever it says is the remote's.
		return fetch.Revision{}, &remoteError{fmt.Errorf("list remote refs: %w", err)}
	}
	name, h, err := resolveAdvertised(refs, s.ref)
	if err != nil {
		return fetch.Revision{}, err
	}
	if c, err := peelCached(s.cache, repo, h); err == nil {
		return fetch.Revision{SHA: c.String(), Tip: h.String()}, nil // already cached: no fetch
	}

	local := name
	if name == plumbing.HEAD { // a remote HEAD that is not a symbolic ref
		local = "refs/remotes/origin/HEAD"
	}
	err = remote.FetchContext(ctx, &git.FetchOptions{
		RefSpecs: []config.RefSpec{config.RefSpec("+" + name + ":" + local)},
		Depth:    1,
		Auth:     auth,
		Tags:     git.NoTags,
		Force:    true,
	})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return fetch.Revision{}, err
	}
	// Resolve what was fetched rather than h: the ref may have moved since
	// it was listed.
	ref, err := repo.Reference(local, false)
	if err != nil {
		return fetch.Revision{}, &cacheError{fmt.Errorf("%s after fetch: %w", name, err)}
	}
	c, err := peel(repo, ref.Hash())
	if err != nil {
		return fetch.Revision{}, fmt.Errorf("%s: %w", name, err)
	}
	return fetch.Revision{SHA: c.String(), Fetched: true, Tip: ref.Hash().String()}, nil
}

// fetchCommit handles a ref that is a commit SHA. Servers only hand out
// commits reachable from a ref, so it fetches all branches and tags in full.
func (s *Source) fetchCommit(ctx context.Context, repo *git.Repository, remote *git.Remote, auth transport.AuthMethod) (fetch.Revision, error) {
	h := plumbing.NewHash(s.ref)
	if _, err := repo.CommitObject(h); err == nil {
		return fetch.Revision{SHA: s.ref}, nil
	}
	// Fetching without depth into a shallow clone does not bring back
	// history below the shallow boundary, so start over with a full clone.
	if shallow, err := repo.Storer.Shallow(); err != nil || len(shallow) > 0 {
		return fetch.Revision{}, &cacheError{errors.New("shallow clone cannot provide older commits")}
	}
	err := remote.FetchContext(ctx, &git.FetchOptions{
		RefSpecs: []config.RefSpec{"+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"},
		Auth:     auth,
		Tags:     git.NoTags,
		Force:    true,
	})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return fetch.Revision{}, err
	}
	if _, err := repo.CommitObject(h); err != nil {
		if !errors.Is(err, plumbing.ErrObjectNotFound) {
			return fetch.Revision{}, err
		}
		return fetch.Revision{}, fmt.Errorf("commit %s is not on any branch or tag: %w", s.ref, plumbing.ErrReferenceNotFound)
	}
	return fetch.Revision{SHA: s.ref, Fetched: true}, nil
}

// Moved reports whether the followed ref names another object now than it
// did for rev, without fetching anything or waiting for the clone (a render
// may hold it): one listing of the remote's refs, or a read of the local
// repository's. A ref that is a commit SHA never moves. The read phase asks
// while a render runs, so that a render of a revision already replaced is
// stopped rather than finished.
func (s *Source) Moved(ctx context.Context, rev fetch.Revision) (bool, error) {
	if isSHA(s.ref) || rev.SHA == "" {
		return false, nil
	}
	tip := plumbing.NewHash(rev.Tip)
	if tip.IsZero() {
		tip = plumbing.NewHash(rev.SHA)
	}
	if s.kind == kindLocal {
		return s.movedLocal(tip) // refs.go
	}
	auth, err := s.auth()
	if err != nil {
		return false, WithReason(err)
	}
	remote := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{s.remote}})
	refs, err := remote.ListContext(ctx, &git.ListOptions{Auth: auth})
	if err != nil {
		return false, fmt.Errorf("list remote refs: %w", WithReason(s.scrub(wrapGoGit(err))))
	}
	_, h, err := resolveAdvertised(refs, s.ref)
	if err != nil {
		return false, WithReason(err)
	}
	return h != tip, nil
}

// resolveAdvertised finds ref among the references a remote advertised and
// returns its full name (symbolic refs followed) and the object it names.
func resolveAdvertised(refs []*plumbing.Reference, ref string) (plumbing.ReferenceName, plumbing.Hash, error) {
	byName := make(map[plumbing.ReferenceName]*plumbing.Reference, len(refs))
	for _, r := range refs {
		byName[r.Name()] = r
	}
	for _, name := range candidates(ref) {
		r, ok := byName[name]
		for i := 0; ok && r.Type() == plumbing.SymbolicReference && i < 5; i++ {
			r, ok = byName[r.Target()]
		}
		if ok && r.Type() == plumbing.HashReference {
			return r.Name(), r.Hash(), nil
		}
	}
	return "", plumbing.ZeroHash, refNotFound(ref)
}

// peel follows annotated tags down to the commit they point at.
func peel(repo *git.Repository, h plumbing.Hash) (plumbing.Hash, error) {
	for range 10 {
		obj, err := repo.Object(plumbing.AnyObject, h)
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("object %s: %w", h, err)
		}
		switch o := obj.(type) {
		case *object.Commit:
			return o.Hash, nil
		case *object.Tag:
			h = o.Target
		default:
			return plumbing.ZeroHash, fmt.Errorf("object %s is a %s, not a commit", h, obj.Type())
		}
	}
	return plumbing.ZeroHash, fmt.Errorf("object %s: too many nested tags", h)
}
