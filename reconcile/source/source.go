package source

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"recond.dev/recond/internal/reason"
	"recond.dev/recond/internal/revision"
	"recond.dev/recond/reconcile/source/fetch"
	"recond.dev/recond/reconcile/source/git"
	"recond.dev/recond/reconcile/source/manifest"
	"recond.dev/recond/reconcile/source/oci"
	"recond.dev/recond/reconcile/source/worker"
)

// Config says where the manifests live and how to reach them.
type Config struct {
	// URL is a local path, a file:// URL, an https:// (or http://) URL, an
	// ssh:// URL or an scp-like address such as git@host:org/repo.git
	// (package git); or a registry's repository, oci://HOST/REPOSITORY
	// (package oci). A local path may point inside a worktree; the
	// repository is found by walking up to its .git.
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
	// Worker runs every render in the render binary, a process of its own
	// killed at the render's deadline (see Worker). Without one, Renderer
	// renders (package renderer's InProcess, in the renderers' own tests);
	// without either, Render fails.
	Worker   *Worker
	Renderer Renderer

	// VerifyCommits refuses to render a revision whose commit (or, when Ref
	// names a tag, whose annotated tag) is not signed by a key of
	// TrustedKeysFile (armored OpenPGP public keys and SSH keys as
	// allowed-signers lines, read at every fetch).
	VerifyCommits   bool
	TrustedKeysFile string

	// OCI says how to reach a registry, for an oci:// URL (package oci).
	OCI OCIOptions

	// SOPSAgeKeysFile holds the age identities (AGE-SECRET-KEY-1...) that
	// decrypt the revision's SOPS-encrypted files, read at every render
	// (package render); "" decrypts nothing.
	SOPSAgeKeysFile string
}

// OCIOptions say how an oci:// source reaches its registry and which
// signatures its artifacts must carry (package oci binds their flags).
type OCIOptions = oci.Settings

// Revision is the outcome of a Fetch: the commit SHA or manifest digest
// the ref resolved to, and whether anything was fetched over the network.
type Revision = fetch.Revision

// fetcher is a kind of source: where a revision comes from. Each is a
// package of its own (git, oci) that fetches, tells whether the ref moved,
// opens a revision's files for rendering and hears when a render of them
// failed for a reason that may be its cache's; the facade composes one
// and renders what it opens, never asking which kind it holds.
type fetcher interface {
	// Fetch resolves the ref to a revision, fetching what is not cached.
	Fetch(ctx context.Context) (fetch.Revision, error)
	// Moved tells whether the ref names another revision now than rev,
	// without fetching it or waiting for the cache.
	Moved(ctx context.Context, rev fetch.Revision) (bool, error)
	// Open opens rev's files (a *fetch.RevisionError when rev has not the
	// form of the source's revisions); the tree holds the cache until it
	// is closed.
	Open(rev string) (*fetch.Tree, error)
	// Failed says that a render of rev failed in a way that may be the
	// cache's (an object it could not read): the next Fetch starts afresh.
	Failed(rev string)
	// DisplayURL is the source's URL without credentials, query or
	// fragment.
	DisplayURL() string
}

// kinds are the kinds of source, tried in order: the first whose URL
// matches builds the Source's fetcher (build checks what of Config is
// its). Each names itself in the fetch.Location of its trees (which the
// render binary opens: package renderer lists the same kinds), gives its
// failures their reasons (reason:
// err as a *reason.Error, one already left as it is; asked in order, so
// the last, Git's, also gives the network's and the machine's), and tells
// a read of its cache that failed (readFault). A new kind of source is a
// package, its settings in Config and a line here.
var kinds = []struct {
	name      string
	match     func(url string) bool
	build     func(cfg Config) (fetcher, error)
	reason    func(error) error
	readFault func(error) bool
}{
	{oci.Name, oci.IsURL, newOCI, oci.WithReason, nil},
	{git.Name, anyURL, newGit, git.WithReason, git.ReadFault},
}

func anyURL(string) bool { return true }

// Source reads manifests from one repository at one ref. Its methods are
// safe for concurrent use.
type Source struct {
	cfg     Config
	f       fetcher
	display string // f.DisplayURL()
	dir     string // cleaned Config.Path: "." or a slash-separated relative path

	mu sync.Mutex
	// chart is the chart of the last revision rendered as one; seed the
	// instance's seed, once a chart's render needed it (withSeed).
	chart chartAt
	seed  []byte
	// sensitive is what the last renders decrypted (render.go).
	sensitive []sensitiveAt
}

// New validates cfg and returns a Source. It does not touch the network or
// the disk.
func New(cfg Config) (*Source, error) {
	s := &Source{cfg: cfg}
	for _, k := range kinds {
		if !k.match(cfg.URL) {
			continue
		}
		f, err := k.build(cfg)
		if err != nil {
			return nil, err
		}
		s.f, s.display = f, f.DisplayURL()
		s.dir, _ = fetch.CleanPath(cfg.Path) // checked by build
		return s, nil
	}
	return nil, errors.New("source: no kind of source reads this URL")
}

// newGit builds the fetcher of a Git repository (package git).
func newGit(cfg Config) (fetcher, error) {
	if cfg.OCI != (OCIOptions{}) {
		return nil, errors.New("source: the --oci-* and artifact signature settings are for an oci:// URL")
	}
	return git.New(git.Options{URL: cfg.URL, Ref: cfg.Ref, Path: cfg.Path, CacheDir: cfg.CacheDir,
		Username: cfg.Username, PasswordFile: cfg.PasswordFile, TokenFile: cfg.TokenFile,
		SSHKeyFile: cfg.SSHKeyFile, KnownHostsFile: cfg.KnownHostsFile, InsecureSkipHostKeyCheck: cfg.InsecureSkipHostKeyCheck,
		VerifyCommits: cfg.VerifyCommits, TrustedKeysFile: cfg.TrustedKeysFile})
}

// newOCI builds the fetcher of a registry's repository (package oci).
func newOCI(cfg Config) (fetcher, error) {
	// The ref and path are checked first, then what is Git's alone.
	ref, err := oci.ParseURL(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	if _, err := oci.CheckRef(cfg.Ref); err != nil {
		return nil, fmt.Errorf("source %s: %w", ref, err)
	}
	if _, err := fetch.CleanPath(cfg.Path); err != nil {
		return nil, err
	}
	switch {
	case cfg.Username != "" || cfg.PasswordFile != "" || cfg.TokenFile != "" || cfg.SSHKeyFile != "" || cfg.KnownHostsFile != "" || cfg.InsecureSkipHostKeyCheck:
		return nil, fmt.Errorf("source %s: the --git-* settings are for Git; a registry's credentials are in --oci-credentials-file", ref)
	case cfg.VerifyCommits:
		return nil, fmt.Errorf("source %s: --verify-commits is for Git; an artifact's signature is checked with --verify-artifacts", ref)
	}
	return oci.NewSource(oci.SourceConfig{URL: cfg.URL, Ref: cfg.Ref, Path: cfg.Path, CacheDir: cfg.CacheDir,
		Limits: cfg.Limits, Settings: cfg.OCI})
}

// Fetch resolves the configured ref to a revision and returns it: a Git
// commit's SHA, or an OCI artifact's manifest digest.
//
// A local repository is only read. For a remote one, Fetch lists the remote
// refs and fetches (depth 1, that ref only) unless the commit the ref
// points at is already cached, which is the case when the ref has not
// moved since the previous Fetch; Revision.Fetched tells which happened. A
// ref that is a commit SHA needs no network once cached. A missing ref
// gives an error matching plumbing.ErrReferenceNotFound; go-git's transport
// errors (transport.ErrAuthenticationRequired, ...) and network errors
// (*url.Error, *net.OpError) stay reachable through errors.Is and As.
// With Config.VerifyCommits (or OCIOptions.VerifyArtifacts), a revision
// that is not signed by a trusted key is refused, cached or not.
func (s *Source) Fetch(ctx context.Context) (Revision, error) { return s.f.Fetch(ctx) }

// Moved reports whether the followed ref names another object now than it
// did for rev, without fetching anything or waiting for the cache (a render
// may hold it): one listing of the remote's refs, a read of the local
// repository's, or one HEAD of the registry's tag. A ref that is a commit
// SHA or a digest never moves. The read phase asks while a render runs, so
// that a render of a revision already replaced is stopped rather than
// finished.
func (s *Source) Moved(ctx context.Context, rev Revision) (bool, error) { return s.f.Moved(ctx, rev) }

// DisplayURL returns the URL without credentials, query or fragment, for
// logs and annotations.
func (s *Source) DisplayURL() string { return s.display }

// renderFailed notes that rendering sha failed with err: unless err is the
// revision's own fault (a *ManifestError that is not about reading an
// object) or a stop, the next Fetch fetches it afresh, once per revision.
func (s *Source) renderFailed(sha string, err error) {
	var (
		me *ManifestError
		we *worker.SetupError
		de *DecryptError
	)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.As(err, &me) && !readFault(err) || errors.As(err, &we) || errors.As(err, &de) {
		return
	}
	s.f.Failed(sha)
}

// readFault reports whether err is the source failing to read a file of
// the revision (missing, or damaged beyond what its types tell).
func readFault(err error) bool {
	var re *manifest.ReadError
	if errors.As(err, &re) {
		return true
	}
	for _, k := range kinds {
		if k.readFault != nil && k.readFault(err) {
			return true
		}
	}
	return false
}

// shortRev is a revision cut for messages: a commit's 12 first hex
// digits, or a digest's "sha256:" and 12 hex digits.
func shortRev(rev string) string { return revision.Abbrev(rev, 12) }

// Reason says why the source could not be read, in the words of the loop's
// closed set of reasons (reconcile.Reason has the same values).
type Reason = reason.Reason

// The reasons an *Error carries.
const (
	ReasonAuth        = reason.Auth
	ReasonNotFound    = reason.NotFound
	ReasonTimeout     = reason.Timeout
	ReasonUnavailable = reason.Unavailable
	ReasonOther       = reason.Other
	// ReasonInvalid: an artifact that recond refuses (package oci).
	ReasonInvalid = reason.Invalid
	// ReasonForbidden: an artifact whose signature does not verify, a
	// redirect recond will not follow (https to http), a render worker
	// the platform refuses what it asks.
	ReasonForbidden = reason.Forbidden
)

// Error is a failure to read the source (Git, a registry, their
// transports, the disk) with its reason, decided once, where the failure
// is made: the loop's classifier asks for it with errors.As rather than
// knowing go-git's or the registry's errors.
type Error = reason.Error

// withReason returns err as an *Error with its reason, as the kind of
// source that made it tells (err itself when it already is one, or when
// none has anything to say: a stop, a manifest's fault, anything unknown).
func withReason(err error) error {
	for _, k := range kinds {
		err = k.reason(err)
	}
	return err
}
