package source

import (
	"compress/flate"
	"compress/zlib"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"github.com/go-git/go-git/v5/storage/memory"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Config says where the manifests live and how to reach them.
type Config struct {
	// URL is a local path, a file:// URL, an https:// (or http://) URL, an
	// ssh:// URL or an scp-like address such as git@host:org/repo.git. A
	// local path may point inside a worktree; the repository is found by
	// walking up to its .git.
	URL string
	// Ref is a branch, a tag, a full reference name ("refs/...") or a full
	// 40-hex commit SHA. "" means the remote HEAD (the default branch), or
	// the checked-out HEAD of a local repository.
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
	// TrustedKeysFile (armored OpenPGP public keys, read at every fetch).
	VerifyCommits   bool
	TrustedKeysFile string
}

// Revision is the outcome of a Fetch.
type Revision struct {
	// SHA is the full hex SHA of the commit the ref resolved to.
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
}

// New validates cfg and returns a Source. It does not touch the network or
// the disk.
func New(cfg Config) (*Source, error) {
	s := &Source{cfg: cfg}
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

// parseURL classifies raw and fills kind, local, remote, display and the
// credentials embedded in the URL. Errors never quote raw, which may hold a
// password.
func (s *Source) parseURL(raw string) error {
	if raw == "" {
		return errors.New("source: URL is empty")
	}
	ep, err := transport.NewEndpoint(raw)
	if err != nil {
		return errors.New("source: URL is neither a URL, an scp-like address nor a local path")
	}
	if ep.Protocol == "file" {
		s.kind = kindLocal
		s.local = ep.Path
		if u, err := url.Parse(raw); err == nil && u.Scheme == "file" {
			if u.Host != "" && u.Host != "localhost" {
				return errors.New("source: file:// URL must not name a host")
			}
			u.User = nil
			s.display = u.String()
		} else {
			s.display = raw
		}
		return nil
	}
	if ep.Protocol == "ssh" && !strings.Contains(raw, "://") {
		// scp-like user@host:path; a "user:password" login loses its password.
		s.kind = kindSSH
		s.sshUser, _, _ = strings.Cut(ep.User, ":")
		s.sshAddr = net.JoinHostPort(ep.Host, strconv.Itoa(portOr(ep.Port, 22)))
		s.remote = ep.Host + ":" + ep.Path
		if s.sshUser != "" {
			s.remote = s.sshUser + "@" + s.remote
		}
		s.display = s.remote
		return nil
	}

	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("source: URL cannot be parsed")
	}
	switch u.Scheme {
	case "http", "https":
		s.kind = kindHTTP
		if u.User != nil {
			s.urlUser = u.User.Username()
			s.urlPassword, _ = u.User.Password()
		}
		// Credentials go to go-git as BasicAuth, never in the URL, so that
		// no error message (e.g. a *url.Error) can contain them.
		u.User = nil
	case "ssh":
		s.kind = kindSSH
		if u.User != nil {
			s.sshUser = u.User.Username()
			u.User = url.User(s.sshUser)
		}
		s.sshAddr = net.JoinHostPort(u.Hostname(), strconv.Itoa(portOr(ep.Port, 22)))
	default:
		return fmt.Errorf("source: unsupported URL scheme %q (use https, http, ssh, file or a local path)", u.Scheme)
	}
	s.remote = u.String()
	s.display, s.hidden = displayURL(u)
	return nil
}

// displayURL is u (without user information already) as it is shown in
// logs, spans, annotations, Events and the status page: without its query
// and fragment, which may carry a token ("?private_token=..."). hidden are
// the dropped parts, raw and decoded, for scrub.
func displayURL(u *url.URL) (display string, hidden []string) {
	if u.RawQuery == "" && u.Fragment == "" && !u.ForceQuery {
		return u.String(), nil
	}
	add := func(v string) {
		if len(v) >= 3 {
			hidden = append(hidden, v)
		}
	}
	add(u.RawQuery)
	add(u.RawFragment)
	add(u.Fragment)
	if q, err := url.ParseQuery(u.RawQuery); err == nil {
		for _, vs := range q {
			for _, v := range vs {
				add(v)
				add(url.QueryEscape(v))
			}
		}
	}
	for _, kv := range strings.Split(u.RawQuery, "&") {
		_, v, _ := strings.Cut(kv, "=")
		add(v)
	}
	sort.Slice(hidden, func(i, j int) bool { return len(hidden[i]) > len(hidden[j]) })
	c := *u
	c.RawQuery, c.Fragment, c.RawFragment, c.ForceQuery = "", "", "", false
	return c.String(), hidden
}

// scrub removes from err's text what display dropped from the URL (go-git
// quotes the URL it requested); errors.Is and errors.As still see err.
func (s *Source) scrub(err error) error {
	if err == nil || len(s.hidden) == 0 {
		return err
	}
	msg := err.Error()
	out := msg
	for _, h := range s.hidden {
		out = strings.ReplaceAll(out, h, "…")
	}
	if out == msg {
		return err
	}
	return &redactedError{msg: out, err: err}
}

// DisplayURL returns the URL without credentials, query or fragment, for
// logs and annotations.
func (s *Source) DisplayURL() string { return s.display }

func portOr(p, def int) int {
	if p > 0 {
		return p
	}
	return def
}

func hostOnly(addr string) string {
	h, p, err := net.SplitHostPort(addr)
	if err != nil || p == "22" {
		return h
	}
	return "-p " + p + " " + h
}

func isSHA(ref string) bool {
	if len(ref) != 40 {
		return false
	}
	_, err := hex.DecodeString(ref)
	return err == nil
}

// checkRef normalises a commit SHA to lower case and rejects names git
// would refuse, which could otherwise be mistaken for refspec syntax.
func checkRef(ref string) (string, error) {
	if ref == "" || ref == "HEAD" {
		return ref, nil
	}
	if isSHA(ref) {
		return strings.ToLower(ref), nil
	}
	name := ref
	if !strings.HasPrefix(name, "refs/") {
		name = "refs/heads/" + name
	}
	if err := plumbing.ReferenceName(name).Validate(); err != nil {
		return "", fmt.Errorf("source: ref %q: %w", ref, err)
	}
	return ref, nil
}

// cleanDir turns Config.Path into a clean slash-separated path relative to
// the repository root, "." for the root itself. A leading "/" is allowed
// (it means the root); climbing out with ".." is not.
func cleanDir(p string) (string, error) {
	p = path.Clean(strings.TrimLeft(filepath.ToSlash(p), "/"))
	if p == ".." || strings.HasPrefix(p, "../") {
		return "", fmt.Errorf("source: path %q leaves the repository", p)
	}
	return p, nil
}

// candidates lists the full reference names a short ref may stand for, in
// the order they are tried: a branch wins over a tag of the same name.
func candidates(ref string) []plumbing.ReferenceName {
	switch {
	case ref == "" || ref == "HEAD":
		return []plumbing.ReferenceName{plumbing.HEAD}
	case strings.HasPrefix(ref, "refs/"):
		return []plumbing.ReferenceName{plumbing.ReferenceName(ref)}
	}
	return []plumbing.ReferenceName{plumbing.NewBranchReferenceName(ref), plumbing.NewTagReferenceName(ref)}
}

func refNotFound(ref string) error {
	if ref == "" {
		ref = "HEAD"
	}
	return fmt.Errorf("ref %q: %w", ref, plumbing.ErrReferenceNotFound)
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
		return Revision{}, fmt.Errorf("fetch %s: %w", s.display, s.scrub(wrapGoGit(err)))
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

// renderFailed notes that rendering sha failed with err: unless err is the
// commit's own fault (a *ManifestError that is not about reading an object)
// or a stop, the next Fetch clones afresh, once per revision.
func (s *Source) renderFailed(sha string, err error) {
	var (
		me *ManifestError
		we *workerError
	)
	if s.kind == kindLocal || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.As(err, &me) && !readFault(err) || errors.As(err, &we) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rebuilt != sha {
		s.suspect = sha
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

// readFault reports whether err is go-git failing to read an object of the
// clone (missing, or damaged beyond what its types tell).
func readFault(err error) bool {
	msg := err.Error()
	var (
		ore     *objectReadError
		corrupt flate.CorruptInputError
	)
	return errors.As(err, &ore) || errors.As(err, &corrupt) || errors.Is(err, zlib.ErrChecksum) || errors.Is(err, zlib.ErrHeader) ||
		errors.Is(err, plumbing.ErrObjectNotFound) || errors.Is(err, io.ErrUnexpectedEOF) ||
		strings.Contains(msg, "invalid git object") || strings.Contains(msg, "malformed IDX") ||
		strings.Contains(msg, "zlib: invalid") || strings.Contains(msg, "packfile")
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
			return false, err
		}
		return now.tip != tip, nil
	}
	auth, err := s.auth()
	if err != nil {
		return false, err
	}
	remote := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{s.remote}})
	refs, err := remote.ListContext(ctx, &git.ListOptions{Auth: auth})
	if err != nil {
		return false, fmt.Errorf("list remote refs: %w", s.scrub(wrapGoGit(err)))
	}
	_, h, err := resolveAdvertised(refs, s.ref)
	if err != nil {
		return false, err
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

// open opens the repository Render reads from: the local repository, or
// the cache of a remote one. Its large objects are streamed when read (see
// streamLarge), so that looking at an object's size never costs its content.
func (s *Source) open() (*git.Repository, error) {
	repo, err := s.openPlain()
	if err != nil {
		return nil, err
	}
	return streamLarge(repo)
}

func (s *Source) openPlain() (*git.Repository, error) {
	if s.kind == kindLocal {
		repo, err := git.PlainOpenWithOptions(s.local, &git.PlainOpenOptions{DetectDotGit: true, EnableDotGitCommonDir: true})
		if errors.Is(err, git.ErrRepositoryNotExists) {
			// DetectDotGit only finds .git directories; try a bare repository.
			if bare, bareErr := git.PlainOpen(s.local); bareErr == nil {
				return bare, nil
			}
		}
		return repo, err
	}
	repo, err := git.PlainOpen(s.cache)
	if errors.Is(err, git.ErrRepositoryNotExists) {
		return nil, fmt.Errorf("no clone cached yet (Fetch first): %w", err)
	}
	return repo, err
}

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

// remoteError is a failure of the remote (or of the way to it) that the
// clone has no part in: it is never rebuilt for one.
type remoteError struct{ err error }

func (e *remoteError) Error() string { return e.err.Error() }
func (e *remoteError) Unwrap() error { return e.err }

// errCredentials marks a credentials file that cannot be read: not the
// clone's fault.
var errCredentials = errors.New("read credentials")

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
		ce      *cacheError
		re      *remoteError
		urlErr  *url.Error
		opErr   *net.OpError
		httpErr *githttp.Err
		keyErr  *knownhosts.KeyError
	)
	switch {
	case errors.As(err, &ce), errors.Is(err, plumbing.ErrObjectNotFound):
		return true
	case errors.As(err, &re), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, plumbing.ErrReferenceNotFound),
		errors.Is(err, transport.ErrAuthenticationRequired), errors.Is(err, transport.ErrAuthorizationFailed),
		errors.Is(err, transport.ErrInvalidAuthMethod), errors.Is(err, transport.ErrRepositoryNotFound),
		errors.Is(err, transport.ErrEmptyRemoteRepository), errors.Is(err, errCredentials),
		// (Not net.Error: syscall.Errno is one, and a full disk is the
		// clone's.)
		errors.As(err, &urlErr), errors.As(err, &opErr),
		errors.As(err, &httpErr), errors.As(err, &keyErr),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		strings.Contains(err.Error(), "ssh: unable to authenticate"):
		return false
	}
	return true
}

// cacheLocks serialises work on one cache directory across Sources.
var cacheLocks sync.Map // string → *sync.RWMutex

func cacheLock(dir string) *sync.RWMutex {
	mu, _ := cacheLocks.LoadOrStore(dir, new(sync.RWMutex))
	return mu.(*sync.RWMutex)
}

// auth builds the transport credentials, reading secret files afresh.
func (s *Source) auth() (transport.AuthMethod, error) {
	switch s.kind {
	case kindHTTP:
		user, password := s.cfg.Username, s.urlPassword
		if user == "" {
			user = s.urlUser
		}
		for _, f := range []string{s.cfg.PasswordFile, s.cfg.TokenFile} {
			if f == "" {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				return nil, fmt.Errorf("%w: %w", errCredentials, err)
			}
			password = strings.TrimRight(string(b), " \t\r\n")
		}
		if user == "" && password == "" {
			return nil, nil
		}
		if user == "" {
			user = "git"
		}
		return &githttp.BasicAuth{Username: user, Password: password}, nil
	case kindSSH:
		helper := gitssh.HostKeyCallbackHelper{HostKeyCallback: ssh.InsecureIgnoreHostKey()}
		if !s.cfg.InsecureSkipHostKeyCheck {
			// Checked here because go-git silently skips missing files.
			if _, err := os.Stat(s.cfg.KnownHostsFile); err != nil {
				return nil, fmt.Errorf("known_hosts: %w", err)
			}
			db, err := gitssh.NewKnownHostsDb(s.cfg.KnownHostsFile)
			if err != nil {
				return nil, fmt.Errorf("known_hosts: %w", err)
			}
			// Offer only the key types known_hosts has for this host, so the
			// server does not pick one we cannot verify.
			helper = gitssh.HostKeyCallbackHelper{
				HostKeyCallback:   db.HostKeyCallback(),
				HostKeyAlgorithms: db.HostKeyAlgorithms(s.sshAddr),
			}
		}
		if s.cfg.SSHKeyFile == "" {
			a, err := gitssh.NewSSHAgentAuth(s.sshUser)
			if err != nil {
				return nil, fmt.Errorf("ssh agent: %w", err)
			}
			a.HostKeyCallbackHelper = helper
			return a, nil
		}
		k, err := gitssh.NewPublicKeysFromFile(s.sshUser, s.cfg.SSHKeyFile, "")
		if err != nil {
			return nil, fmt.Errorf("ssh key: %w", err)
		}
		k.HostKeyCallbackHelper = helper
		return k, nil
	}
	return nil, nil
}

// goGitError presents an error from go-git: its message loses the newline
// or dangling ": " that go-git leaves when it quotes an HTTP response body,
// and the cause inside go-git's UnexpectedError and PermanentError (which
// have no Unwrap method) becomes reachable with errors.Is and errors.As.
type goGitError struct{ errs []error }

func (e *goGitError) Error() string   { return strings.TrimRight(e.errs[0].Error(), " :\r\n") }
func (e *goGitError) Unwrap() []error { return e.errs }

func wrapGoGit(err error) error {
	errs := []error{err}
	var ue *plumbing.UnexpectedError
	if errors.As(err, &ue) {
		errs = append(errs, ue.Err)
	}
	var pe *plumbing.PermanentError
	if errors.As(err, &pe) {
		errs = append(errs, pe.Err)
	}
	return &goGitError{errs}
}
