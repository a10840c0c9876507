package source

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

	"recond.dev/recond/reconcile/source/oci"
)

// Config says where the manifests live and how to reach them.
type Config struct {
	// URL is a local path, a file:// URL, an https:// (or http://) URL, an
	// ssh:// URL or an scp-like address such as git@host:org/repo.git; or a
	// registry's repository, oci://HOST/REPOSITORY (oci.go). A
	// local path may point inside a worktree; the repository is found by
	// walking up to its .git.
	URL string
	// Ref is a branch, a tag, a full reference name ("refs/...") or a full
	// 40-hex commit SHA. "" means the remote HEAD (the default branch), or
	// the checked-out HEAD of a local repository. For an oci:// URL it is a
	// tag ("" is latest) or a sha256: digest.
	Ref string
	// Path is the directory inside the repository holding the manifests,
	// relative to the repository root; "" or "." is the root itself.
	Path string
	// CacheDir is the directory where clones of remote repositories are kept
	// between fetches. It is required for remote URLs.
	CacheDir string

	// Username, PasswordFile and TokenFile configure HTTPS basic auth. The
	// files are read at every fetch, so secrets can be rotated, and trailing
	// whitespace is trimmed. A token is sent as the basic-auth password;
	// Username defaults to "git" when a secret is set.
	Username, PasswordFile, TokenFile string
	// SSHKeyFile is the SSH private key (unencrypted); when empty the SSH
	// agent at $SSH_AUTH_SOCK is used. KnownHostsFile verifies host keys.
	SSHKeyFile, KnownHostsFile string
	// InsecureSkipHostKeyCheck accepts any SSH host key. It is only allowed
	// when no KnownHostsFile is set.
	InsecureSkipHostKeyCheck bool

	// Limits bound what rendering may read and produce; zero fields take
	// the defaults of DefaultLimits.
	Limits Limits
	// Helm renders a chart at Path (a Chart.yaml there).
	Helm Helm
	// Worker, when set, runs kustomize in a worker process that is killed
	// at the render's deadline (see Worker); nil runs it in-process.
	Worker *Worker

	// VerifyCommits refuses to render a revision whose commit (or, when Ref
	// names a tag, whose annotated tag) is not signed by a key of
	// TrustedKeysFile (armored OpenPGP public keys and SSH keys as
	// allowed-signers lines, read at every fetch).
	VerifyCommits   bool
	TrustedKeysFile string

	// OCI says how to reach a registry, for an oci:// URL (oci.go).
	OCI OCIOptions

	// SOPSAgeKeysFile holds the age identities (AGE-SECRET-KEY-1...) that
	// decrypt the revision's SOPS-encrypted files, read at every render
	// (decrypt.go); "" decrypts nothing.
	SOPSAgeKeysFile string
}

// Revision is the outcome of a Fetch.
type Revision struct {
	// SHA is the full hex SHA of the commit the ref resolved to, or for an
	// OCI source the manifest's digest ("sha256:" and 64 hex digits).
	SHA string
	// Fetched is false when no objects were fetched over the network: the
	// repository is local, or the commit was already in the cache.
	Fetched bool

	tip plumbing.Hash // the object the ref named: an annotated tag, or the commit
}

type kind int

const (
	kindLocal kind = iota
	kindHTTP
	kindSSH
	kindOCI
)

// Source reads manifests from one repository at one ref. Its methods are
// safe for concurrent use.
type Source struct {
	cfg     Config
	kind    kind
	ref     string // validated Config.Ref
	dir     string // cleaned Config.Path: "." or a slash-separated relative path
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
	// chart is the chart of the last revision rendered as one; seed the
	// instance's seed, once a chart's render needed it (withSeed).
	chart chartAt
	seed  []byte
	// sensitive is what the last renders decrypted (decrypt.go).
	sensitive []sensitiveAt
	// oci is the registry's side of an oci:// source (oci.go).
	oci *ociSource
}

// New validates cfg and returns a Source. It does not touch the network or
// the disk.
func New(cfg Config) (*Source, error) {
	s := &Source{cfg: cfg}
	if oci.IsURL(cfg.URL) {
		if err := s.newOCI(cfg); err != nil {
			return nil, err
		}
		return s, nil
	}
	if cfg.OCI != (OCIOptions{}) {
		return nil, errors.New("source: the --oci-* and artifact signature settings are for an oci:// URL")
	}
	if err := s.parseURL(cfg.URL); err != nil {
		return nil, err
	}
	var err error
	if s.ref, err = checkRef(cfg.Ref); err != nil {
		return nil, err
	}
	if s.dir, err = cleanDir(cfg.Path); err != nil {
		return nil, err
	}

	httpAuth := cfg.Username != "" || cfg.PasswordFile != "" || cfg.TokenFile != ""
	sshAuth := cfg.SSHKeyFile != "" || cfg.KnownHostsFile != "" || cfg.InsecureSkipHostKeyCheck
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
		if cfg.PasswordFile != "" && cfg.TokenFile != "" {
			return nil, fmt.Errorf("source %s: set a password file or a token file, not both", s.display)
		}
	case kindSSH:
		if cfg.PasswordFile != "" || cfg.TokenFile != "" {
			return nil, fmt.Errorf("source %s: password and token files apply only to https URLs; use an SSH key", s.display)
		}
		if cfg.KnownHostsFile == "" && !cfg.InsecureSkipHostKeyCheck {
			return nil, fmt.Errorf("source %s: ssh needs a known_hosts file to verify the server: set KnownHostsFile "+
				"(for example from `ssh-keyscan %s`), or set InsecureSkipHostKeyCheck to accept any host key",
				s.display, hostOnly(s.sshAddr))
		}
		if cfg.KnownHostsFile != "" && cfg.InsecureSkipHostKeyCheck {
			return nil, fmt.Errorf("source %s: set KnownHostsFile or InsecureSkipHostKeyCheck, not both", s.display)
		}
		if s.sshUser == "" {
			s.sshUser = cfg.Username
		}
		if s.sshUser == "" {
			s.sshUser = "git"
		}
	}
	if cfg.CacheDir == "" {
		return nil, fmt.Errorf("source %s: a cache directory is required for a remote repository", s.display)
	}
	sum := sha256.Sum256([]byte(s.remote))
	s.cache = filepath.Join(cfg.CacheDir, hex.EncodeToString(sum[:12]))
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
func (s *Source) Fetch(ctx context.Context) (Revision, error) {
	if err := ctx.Err(); err != nil {
		return Revision{}, fmt.Errorf("fetch %s: %w", s.display, err)
	}
	var rev Revision
	var err error
	switch s.kind {
	case kindLocal:
		rev, err = s.fetchLocal()
	case kindOCI:
		mu := cacheLock(s.cache)
		mu.Lock()
		defer mu.Unlock()
		if rev, err = s.fetchOCI(ctx); err == nil {
			// Checked once per digest and keys, still under the lock.
			err = s.verifyArtifact(ctx, rev.SHA)
		}
		if err != nil {
			return Revision{}, fmt.Errorf("fetch %s: %w", s.display, withReason(err))
		}
		return rev, nil
	default:
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
		return Revision{}, fmt.Errorf("fetch %s: %w", s.display, withReason(s.scrub(wrapGoGit(err))))
	}
	// Verified on every Fetch, cached or not, still under the cache lock:
	// a revision refused once stays refused.
	if s.cfg.VerifyCommits {
		if err := s.verify(rev); err != nil {
			return Revision{}, fmt.Errorf("fetch %s: %w", s.display, err)
		}
	}
	return rev, nil
}

func (s *Source) fetchLocal() (Revision, error) {
	repo, err := s.open()
	if err != nil {
		return Revision{}, err
	}
	var h plumbing.Hash
	switch {
	case s.ref == "":
		head, err := repo.Head()
		if err != nil {
			return Revision{}, fmt.Errorf("HEAD: %w", err)
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
				return Revision{}, fmt.Errorf("ref %q: %w", s.ref, err)
			}
			h, found = ref.Hash(), true
			break
		}
		if !found {
			return Revision{}, refNotFound(s.ref)
		}
	}
	c, err := peel(repo, h)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return Revision{}, fmt.Errorf("%w: %w", refNotFound(s.ref), err)
	}
	if err != nil {
		return Revision{}, err
	}
	return Revision{SHA: c.String(), tip: h}, nil
}

// fetchChecked is fetchRemote, then, after a fetch, a read of the revision's commit and root
// tree through a clone opened afresh, as Render will read it: a damaged pack
// or index that the fetching Repository did not need (it held the objects in
// memory) is found here, where the clone can still be rebuilt.
func (s *Source) fetchChecked(ctx context.Context) (Revision, error) {
	rev, err := s.fetchRemote(ctx)
	if err != nil || !rev.Fetched {
		// Not fetched: the revision was read from the clone just now.
		return rev, err
	}
	repo, err := git.PlainOpen(s.cache)
	if err != nil {
		return Revision{}, &cacheError{fmt.Errorf("reopen: %w", err)}
	}
	c, err := repo.CommitObject(plumbing.NewHash(rev.SHA))
	if err == nil {
		_, err = c.Tree()
	}
	if err != nil {
		return Revision{}, &cacheError{fmt.Errorf("read commit %s: %w", rev.SHA, err)}
	}
	return rev, nil
}

func (s *Source) fetchRemote(ctx context.Context) (Revision, error) {
	repo, err := s.openCache()
	if err != nil {
		return Revision{}, err
	}
	auth, err := s.auth()
	if err != nil {
		return Revision{}, err
	}
	remote := git.NewRemote(repo.Storer, &config.RemoteConfig{Name: "origin", URLs: []string{s.remote}})
	if isSHA(s.ref) {
		return s.fetchCommit(ctx, repo, remote, auth)
	}

	refs, err := remote.ListContext(ctx, &git.ListOptions{Auth: auth})
	if err != nil {
		// Listing writes nothing locally: whatever it says is the remote's.
		return Revision{}, &remoteError{fmt.Errorf("list remote refs: %w", err)}
	}
	name, h, err := resolveAdvertised(refs, s.ref)
	if err != nil {
		return Revision{}, err
	}
	if c, err := peel(repo, h); err == nil {
		return Revision{SHA: c.String(), tip: h}, nil // already cached: no fetch
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
		return Revision{}, err
	}
	// Resolve what was fetched rather than h: the ref may have moved since
	// it was listed.
	ref, err := repo.Reference(local, false)
	if err != nil {
		return Revision{}, &cacheError{fmt.Errorf("%s after fetch: %w", name, err)}
	}
	c, err := peel(repo, ref.Hash())
	if err != nil {
		return Revision{}, fmt.Errorf("%s: %w", name, err)
	}
	return Revision{SHA: c.String(), Fetched: true, tip: ref.Hash()}, nil
}

// fetchCommit handles a ref that is a commit SHA. Servers only hand out
// commits reachable from a ref, so it fetches all branches and tags in full.
func (s *Source) fetchCommit(ctx context.Context, repo *git.Repository, remote *git.Remote, auth transport.AuthMethod) (Revision, error) {
	h := plumbing.NewHash(s.ref)
	if _, err := repo.CommitObject(h); err == nil {
		return Revision{SHA: s.ref}, nil
	}
	// Fetching without depth into a shallow clone does not bring back
	// history below the shallow boundary, so start over with a full clone.
	if shallow, err := repo.Storer.Shallow(); err != nil || len(shallow) > 0 {
		return Revision{}, &cacheError{errors.New("shallow clone cannot provide older commits")}
	}
	err := remote.FetchContext(ctx, &git.FetchOptions{
		RefSpecs: []config.RefSpec{"+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"},
		Auth:     auth,
		Tags:     git.NoTags,
		Force:    true,
	})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return Revision{}, err
	}
	if _, err := repo.CommitObject(h); err != nil {
		if !errors.Is(err, plumbing.ErrObjectNotFound) {
			return Revision{}, err
		}
		return Revision{}, fmt.Errorf("commit %s is not on any branch or tag: %w", s.ref, plumbing.ErrReferenceNotFound)
	}
	return Revision{SHA: s.ref, Fetched: true}, nil
}

// Moved reports whether the followed ref names another object now than it
// did for rev, without fetching anything or waiting for the clone (a render
// may hold it): one listing of the remote's refs, or a read of the local
// repository's. A ref that is a commit SHA never moves. The read phase asks
// while a render runs, so that a render of a revision already replaced is
// stopped rather than finished.
func (s *Source) Moved(ctx context.Context, rev Revision) (bool, error) {
	if s.kind == kindOCI {
		// A tag may look like a commit SHA; a digest never moves.
		return s.movedOCI(ctx, rev)
	}
	if isSHA(s.ref) || rev.SHA == "" {
		return false, nil
	}
	tip := rev.tip
	if tip.IsZero() {
		tip = plumbing.NewHash(rev.SHA)
	}
	if s.kind == kindLocal {
		now, err := s.fetchLocal()
		if err != nil {
			return false, withReason(err)
		}
		return now.tip != tip, nil
	}
	auth, err := s.auth()
	if err != nil {
		return false, withReason(err)
	}
	remote := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{s.remote}})
	refs, err := remote.ListContext(ctx, &git.ListOptions{Auth: auth})
	if err != nil {
		return false, fmt.Errorf("list remote refs: %w", withReason(s.scrub(wrapGoGit(err))))
	}
	_, h, err := resolveAdvertised(refs, s.ref)
	if err != nil {
		return false, withReason(err)
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
