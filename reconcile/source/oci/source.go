package oci

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"recond.dev/recond/internal/reason"
	"recond.dev/recond/internal/revision"
	"recond.dev/recond/internal/transient"
	"recond.dev/recond/reconcile/source/fetch"
	"recond.dev/recond/reconcile/source/manifest"
	"recond.dev/recond/reconcile/source/tree"
)

// A Source (a URL oci://HOST/REPOSITORY) follows a tag, or stays at a
// digest, of a registry's repository. Its revision is the manifest's
// digest ("sha256:..."), where a Git source's is the commit's SHA. Each
// Fetch resolves the tag with one HEAD request and pulls (the manifest and
// its one content layer, by digest, verified) only when the digest is not
// cached; Open unpacks the cached layer in memory (layer.go) into a tree
// that renders like a Git commit's.
//
// The cache holds one directory per digest, CacheDir/<repository's
// hash>/<hex>, with manifest.json and layer.tar.gz, written whole or not at
// all; the newest few are kept.

// keep is how many pulled artifacts the cache keeps (a revert to one of
// them pulls nothing).
const keep = 4

// Name names the kind of source in a fetch.Location.
const Name = "oci"

// SourceConfig says which artifact a Source follows and how.
type SourceConfig struct {
	// URL is oci://HOST/REPOSITORY; Ref a tag ("" is latest) or a sha256:
	// digest; Path the directory inside the artifact holding the
	// manifests; CacheDir where pulled artifacts are kept (required).
	URL, Ref, Path, CacheDir string
	// Limits bound what a pull and an unpack may read.
	Limits manifest.Limits
	// Settings say how to reach the registry and which signatures to ask.
	Settings Settings
}

// Source reads the artifacts of one registry's repository at one ref. Its
// methods are safe for concurrent use.
type Source struct {
	cfg     SourceConfig
	ref     string // validated SourceConfig.Ref
	dir     string // cleaned SourceConfig.Path
	display string
	cache   string // CacheDir/oci-<hash of the repository>
	client  *Client

	mu sync.Mutex
	// verified are the digests whose signature was checked, with the keys
	// it was checked against (keys file's hash): checked once per digest.
	verified map[string]string
	// suspect is a digest whose render failed for a reason that may be
	// the cache's, to be pulled afresh by the next Fetch; rebuilt is the
	// last one that was.
	suspect, rebuilt string
}

// NewSource validates cfg and returns a Source. It does not touch the
// network or the disk.
func NewSource(cfg SourceConfig) (*Source, error) {
	ref, err := ParseURL(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	s := &Source{cfg: cfg, display: ref.String(), verified: map[string]string{}}
	if s.ref, err = CheckRef(cfg.Ref); err != nil {
		return nil, fmt.Errorf("source %s: %w", s.display, err)
	}
	if s.dir, err = fetch.CleanPath(cfg.Path); err != nil {
		return nil, err
	}
	if cfg.CacheDir == "" {
		return nil, fmt.Errorf("source %s: a cache directory is required for a registry", s.display)
	}
	o := cfg.Settings
	client, err := New(ref, Options{CredentialsFile: o.CredentialsFile, CAFile: o.CAFile,
		Insecure: o.Insecure, UserAgent: "recond"})
	if err == nil && o.VerifyArtifacts && o.CosignKeysFile == "" {
		err = errors.New("--verify-artifacts needs --cosign-keys-file")
	}
	if err != nil {
		return nil, err
	}
	s.client = client
	sum := sha256.Sum256([]byte(ref.String()))
	s.cache = filepath.Join(cfg.CacheDir, "oci-"+hex.EncodeToString(sum[:12]))
	return s, nil
}

// CacheDir is the directory of the pulled artifacts, one directory per
// digest (its hex) below it.
func (s *Source) CacheDir() string { return s.cache }

// DisplayURL returns the repository's URL, oci://HOST/REPOSITORY.
func (s *Source) DisplayURL() string { return s.display }

// Fetch resolves the ref to a manifest digest and pulls the artifact
// unless it is cached; with Settings.VerifyArtifacts, it refuses one
// without a signature by a trusted key.
func (s *Source) Fetch(ctx context.Context) (fetch.Revision, error) {
	if err := ctx.Err(); err != nil {
		return fetch.Revision{}, fmt.Errorf("fetch %s: %w", s.display, err)
	}
	mu := cacheLock(s.cache)
	mu.Lock()
	defer mu.Unlock()
	rev, err := s.fetch(ctx)
	if err == nil {
		// Checked once per digest and keys, still under the lock.
		err = s.verify(ctx, rev.SHA)
	}
	if err != nil {
		return fetch.Revision{}, fmt.Errorf("fetch %s: %w", s.display, withReason(err))
	}
	return rev, nil
}

// fetch resolves the ref and pulls the artifact unless it is cached.
// Called under the cache's lock.
func (s *Source) fetch(ctx context.Context) (fetch.Revision, error) {
	if d := s.takeSuspect(); d != "" {
		// Its cached files could not all be read: pull them again.
		_ = os.RemoveAll(s.artifactDir(d))
	}
	// What a pull cut short (recond killed) left behind.
	if old, _ := filepath.Glob(filepath.Join(s.cache, ".pull-*")); len(old) > 0 {
		for _, o := range old {
			_ = os.RemoveAll(o)
		}
	}
	var desc ocispec.Descriptor
	if IsDigest(s.ref) && s.cached(s.ref) {
		// A digest never moves: once pulled, no request at all.
		desc.Digest = digest.Digest(s.ref)
	} else {
		var err error
		if desc, err = s.client.Resolve(ctx, s.ref); err != nil {
			return fetch.Revision{}, err
		}
	}
	rev := fetch.Revision{SHA: desc.Digest.String()}
	if !s.cached(rev.SHA) {
		if err := s.pull(ctx, desc); err != nil {
			return fetch.Revision{}, err
		}
		rev.Fetched = true
	}
	s.prune(rev.SHA)
	return rev, nil
}

// Moved asks the registry which digest the tag names now: one HEAD. A
// digest never moves (and a tag may look like a commit SHA).
func (s *Source) Moved(ctx context.Context, rev fetch.Revision) (bool, error) {
	if IsDigest(s.ref) || rev.SHA == "" {
		return false, nil
	}
	desc, err := s.client.Resolve(ctx, s.ref)
	if err != nil {
		return false, withReason(err)
	}
	return desc.Digest.String() != rev.SHA, nil
}

// Failed notes that rendering rev failed for a reason that may be the
// cache's: the next Fetch pulls it again, once per revision.
func (s *Source) Failed(rev string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rebuilt != rev {
		s.suspect = rev
	}
}

// takeSuspect returns the revision to pull afresh ("" for none) and
// remembers it was.
func (s *Source) takeSuspect() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.suspect
	if d != "" {
		s.suspect, s.rebuilt = "", d
	}
	return d
}

// pull fetches the manifest desc names and its content layer into the
// cache: into a temporary directory renamed into place once both are
// verified.
func (s *Source) pull(ctx context.Context, desc ocispec.Descriptor) error {
	c := s.client
	lim := s.cfg.Limits.WithDefaults()
	raw, err := c.Manifest(ctx, desc, lim.MaxFileBytes)
	if err != nil {
		return err
	}
	a, err := Parse(raw, desc)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(s.cache, 0o755); err != nil {
		return &cacheError{err}
	}
	tmp, err := os.MkdirTemp(s.cache, ".pull-")
	if err != nil {
		return &cacheError{err}
	}
	defer os.RemoveAll(tmp)
	if err := os.WriteFile(filepath.Join(tmp, "manifest.json"), raw, 0o644); err != nil {
		return &cacheError{err}
	}
	f, err := os.Create(filepath.Join(tmp, "layer.tar.gz"))
	if err != nil {
		return &cacheError{err}
	}
	err = c.Blob(ctx, a.Layer, lim.MaxBytes, f)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = &cacheError{cerr}
	}
	if err != nil {
		return err
	}
	dst := s.artifactDir(desc.Digest.String())
	_ = os.RemoveAll(dst)
	if err := os.Rename(tmp, dst); err != nil {
		return &cacheError{err}
	}
	return nil
}

// manifestDesc describes the manifest of digest rev, of size bytes.
func manifestDesc(rev string, size int) ocispec.Descriptor {
	return ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.Digest(rev), Size: int64(size)}
}

// artifactDir is where the artifact of digest rev is cached.
func (s *Source) artifactDir(rev string) string { return artifactDir(s.cache, rev) }

func artifactDir(cache, rev string) string {
	return filepath.Join(cache, strings.TrimPrefix(rev, "sha256:"))
}

// cached tells whether the artifact of digest rev is in the cache (it is
// verified when it is read).
func (s *Source) cached(rev string) bool {
	dir := s.artifactDir(rev)
	for _, f := range []string{"manifest.json", "layer.tar.gz"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || !fi.Mode().IsRegular() {
			return false
		}
	}
	return true
}

// prune removes all but the newest keep cached artifacts, keeping rev.
func (s *Source) prune(rev string) {
	now := time.Now()
	_ = os.Chtimes(s.artifactDir(rev), now, now)
	ents, err := os.ReadDir(s.cache)
	if err != nil || len(ents) <= keep {
		return
	}
	type aged struct {
		name string
		mod  time.Time
	}
	var dirs []aged
	for _, e := range ents {
		if info, err := e.Info(); err == nil && e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			dirs = append(dirs, aged{e.Name(), info.ModTime()})
		}
	}
	sort.Slice(dirs, func(i, j int) bool { return dirs[i].mod.After(dirs[j].mod) })
	for _, d := range dirs[min(keep, len(dirs)):] {
		_ = os.RemoveAll(filepath.Join(s.cache, d.name))
	}
}

// Open unpacks the cached artifact of digest rev (Fetch returned it), and
// keeps the cache locked for reading until the tree is closed.
func (s *Source) Open(rev string) (*fetch.Tree, error) {
	if !IsDigest(rev) {
		return nil, &fetch.RevisionError{Rev: rev, Want: "a sha256: manifest digest"}
	}
	mu := cacheLock(s.cache)
	mu.RLock()
	t, err := Open(fetch.Location{Source: Name, Path: s.cache}, rev, s.dir, s.cfg.Limits)
	if err != nil {
		mu.RUnlock()
		return nil, err
	}
	t.Unlock = mu.RUnlock
	return t, nil
}

// chartFile is the file that makes a directory a Helm chart.
const chartFile = "Chart.yaml"

// Open unpacks the artifact of digest rev cached at loc.Path (as
// Source.Open does: a render worker opens its tree with it): its root and
// dir in it (a cleaned path, "." for the root). A chart's root is the
// archive's one top-level directory, and its path must be the root.
func Open(loc fetch.Location, rev, dir string, lim manifest.Limits) (*fetch.Tree, error) {
	a, err := cachedArtifact(loc.Path, rev)
	if err != nil {
		return nil, err
	}
	lim = lim.WithDefaults()
	f, err := os.Open(filepath.Join(artifactDir(loc.Path, rev), "layer.tar.gz"))
	if err != nil {
		return nil, &manifest.ReadError{Err: fmt.Errorf("read the cached layer of %s: %w", shortRev(rev), err)}
	}
	defer f.Close()
	// The cache holds what the manifest named: a file of another size is
	// damaged, and is not read.
	if fi, err := f.Stat(); err != nil || fi.Size() != a.Layer.Size || a.Layer.Size > lim.MaxBytes {
		return nil, &manifest.ReadError{Err: fmt.Errorf("the cached layer of %s is damaged: not the %d bytes its manifest names", shortRev(rev), a.Layer.Size)}
	}
	blob, err := io.ReadAll(io.LimitReader(f, a.Layer.Size))
	if err != nil {
		return nil, &manifest.ReadError{Err: fmt.Errorf("read the cached layer of %s: %w", shortRev(rev), err)}
	}
	layer, err := unpackLayer(bytes.NewReader(blob), a.Layer.Digest.String(), lim)
	if err != nil {
		return nil, err
	}
	var root tree.Dir = layer
	if a.Format == FormatChart {
		ents := layer.Entries()
		if len(ents) != 1 || ents[0].Kind != tree.KindDir {
			return nil, &manifest.ManifestError{File: "layer", Err: fmt.Errorf("a Helm chart archive holds one directory, the chart; this one holds %d entries", len(ents))}
		}
		if root, err = layer.Dir(ents[0].Name); err != nil {
			return nil, err
		}
		if dir != "." {
			return nil, &manifest.ManifestError{File: dir, Err: errors.New("a Helm chart artifact is rendered from the chart's root: leave --path empty")}
		}
		if _, err := root.Entry(chartFile); err != nil {
			return nil, &manifest.ManifestError{File: ents[0].Name + "/" + chartFile, Err: errors.New("a Helm chart artifact without a Chart.yaml")}
		}
	}
	sub := root
	if dir != "." {
		d, err := tree.ResolveDir(root, dir)
		if err != nil || d == nil {
			return nil, &manifest.ManifestError{File: dir, Err: fmt.Errorf("no such directory in the artifact")}
		}
		sub = d
	}
	// An artifact's time is when it was made, as its manifest says.
	return &fetch.Tree{Rev: rev, Root: root, Dir: sub, Path: dir, Time: a.Created, Reopen: loc}, nil
}

// cachedArtifact reads the cached manifest of rev, checking it still is
// the one rev names.
func cachedArtifact(cache, rev string) (Artifact, error) {
	raw, err := os.ReadFile(filepath.Join(artifactDir(cache, rev), "manifest.json"))
	if err != nil {
		return Artifact{}, &manifest.ReadError{Err: fmt.Errorf("artifact %s is not cached (Fetch first): %w", shortRev(rev), err)}
	}
	if sum := sha256.Sum256(raw); "sha256:"+hex.EncodeToString(sum[:]) != rev {
		return Artifact{}, &manifest.ReadError{Err: fmt.Errorf("the cached manifest of %s is damaged", shortRev(rev))}
	}
	return Parse(raw, manifestDesc(rev, len(raw)))
}

// shortRev is a digest cut for messages: "sha256:" and 12 hex digits.
func shortRev(rev string) string { return revision.Abbrev(rev, 12) }

// cacheLocks serialises work on one cache directory across Sources.
var cacheLocks sync.Map // string → *sync.RWMutex

func cacheLock(dir string) *sync.RWMutex {
	mu, _ := cacheLocks.LoadOrStore(dir, new(sync.RWMutex))
	return mu.(*sync.RWMutex)
}

// cacheError is a problem with the local cache of artifacts.
type cacheError struct{ err error }

func (e *cacheError) Error() string { return "cache: " + e.err.Error() }
func (e *cacheError) Unwrap() error { return e.err }

// WithReason returns err as a *reason.Error with the reason an *Error
// carries (the registry client decided it where it failed); err itself
// when it already is a *reason.Error, or is no *Error.
func WithReason(err error) error {
	var (
		re *reason.Error
		oe *Error
	)
	if err == nil || errors.As(err, &re) || !errors.As(err, &oe) {
		return err
	}
	return &reason.Error{Reason: reason.Reason(oe.Reason), Err: err}
}

// withReason is WithReason, and for what the registry client did not
// classify (the cache's disk), the machine's reason (transient).
func withReason(err error) error {
	err = WithReason(err)
	var re *reason.Error
	if err == nil || errors.As(err, &re) {
		return err
	}
	if r := transient.Reason(err); r != "" {
		return &reason.Error{Reason: reason.Reason(r), Err: err}
	}
	return err
}
