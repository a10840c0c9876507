package source

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

	"recond.dev/recond/internal/revision"
	"recond.dev/recond/reconcile/source/oci"
	"recond.dev/recond/reconcile/source/render"
)

// An OCI source (Config.URL oci://HOST/REPOSITORY) follows a tag, or stays
// at a digest, of a registry's repository. Its revision is the manifest's
// digest ("sha256:..."), where a Git source's is the commit's SHA. Each
// Fetch resolves the tag with one HEAD request and pulls (the manifest and
// its one content layer, by digest, verified) only when the digest is not
// cached; Render unpacks the cached layer in memory (artifact.go) and
// renders it like a Git tree.
//
// The cache holds one directory per digest, CacheDir/<repository's
// hash>/<hex>, with manifest.json and layer.tar.gz, written whole or not at
// all; the newest few are kept.

// ociKeep is how many pulled artifacts the cache keeps (a revert to one of
// them pulls nothing).
const ociKeep = 4

// ociSource is what an OCI source has that a Git one has not.
type ociSource struct {
	client *oci.Client
	// verified are the digests whose signature was checked, with the keys
	// it was checked against (keys file's hash): checked once per digest.
	mu       sync.Mutex
	verified map[string]string
}

// newOCI sets s up for an oci:// URL.
func (s *Source) newOCI(cfg Config) error {
	ref, err := oci.ParseURL(cfg.URL)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	s.kind, s.display, s.remote = kindOCI, ref.String(), ref.String()
	if s.ref, err = oci.CheckRef(cfg.Ref); err != nil {
		return fmt.Errorf("source %s: %w", s.display, err)
	}
	if s.dir, err = cleanDir(cfg.Path); err != nil {
		return err
	}
	switch {
	case cfg.Username != "" || cfg.PasswordFile != "" || cfg.TokenFile != "" || cfg.SSHKeyFile != "" || cfg.KnownHostsFile != "" || cfg.InsecureSkipHostKeyCheck:
		return fmt.Errorf("source %s: the --git-* settings are for Git; a registry's credentials are in --oci-credentials-file", s.display)
	case cfg.VerifyCommits:
		return fmt.Errorf("source %s: --verify-commits is for Git; an artifact's signature is checked with --verify-artifacts", s.display)
	case cfg.CacheDir == "":
		return fmt.Errorf("source %s: a cache directory is required for a registry", s.display)
	}
	client, err := oci.New(ref, oci.Options{CredentialsFile: cfg.OCI.CredentialsFile, CAFile: cfg.OCI.CAFile,
		Insecure: cfg.OCI.Insecure, UserAgent: "recond"})
	if err == nil && cfg.OCI.VerifyArtifacts && cfg.OCI.CosignKeysFile == "" {
		err = errors.New("--verify-artifacts needs --cosign-keys-file")
	}
	if err != nil {
		return err
	}
	s.oci = &ociSource{client: client, verified: map[string]string{}}
	sum := sha256.Sum256([]byte(s.remote))
	s.cache = filepath.Join(cfg.CacheDir, "oci-"+hex.EncodeToString(sum[:12]))
	return nil
}

// isRevision tells whether rev has the form of this source's revisions.
func (s *Source) isRevision(rev string) bool {
	if s.kind == kindOCI {
		return oci.IsDigest(rev)
	}
	return isSHA(rev)
}

// fetchOCI resolves the ref and pulls the artifact unless it is cached.
// Called under the cache's lock.
func (s *Source) fetchOCI(ctx context.Context) (Revision, error) {
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
	c := s.oci.client
	var desc ocispec.Descriptor
	if oci.IsDigest(s.ref) && s.cached(s.ref) {
		// A digest never moves: once pulled, no request at all.
		desc.Digest = digest.Digest(s.ref)
	} else {
		var err error
		if desc, err = c.Resolve(ctx, s.ref); err != nil {
			return Revision{}, err
		}
	}
	rev := Revision{SHA: desc.Digest.String()}
	if !s.cached(rev.SHA) {
		if err := s.pull(ctx, desc); err != nil {
			return Revision{}, err
		}
		rev.Fetched = true
	}
	s.pruneArtifacts(rev.SHA)
	return rev, nil
}

// movedOCI asks the registry which digest the tag names now: one HEAD.
func (s *Source) movedOCI(ctx context.Context, rev Revision) (bool, error) {
	if oci.IsDigest(s.ref) || rev.SHA == "" {
		return false, nil
	}
	desc, err := s.oci.client.Resolve(ctx, s.ref)
	if err != nil {
		return false, withReason(err)
	}
	return desc.Digest.String() != rev.SHA, nil
}

// pull fetches the manifest desc names and its content layer into the
// cache: into a temporary directory renamed into place once both are
// verified.
func (s *Source) pull(ctx context.Context, desc ocispec.Descriptor) error {
	c := s.oci.client
	lim := s.cfg.Limits.WithDefaults()
	raw, err := c.Manifest(ctx, desc, lim.MaxFileBytes)
	if err != nil {
		return err
	}
	a, err := oci.Parse(raw, desc)
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
func (s *Source) artifactDir(rev string) string {
	return filepath.Join(s.cache, strings.TrimPrefix(rev, "sha256:"))
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

// pruneArtifacts removes all but the newest ociKeep cached artifacts,
// keeping rev.
func (s *Source) pruneArtifacts(rev string) {
	now := time.Now()
	_ = os.Chtimes(s.artifactDir(rev), now, now)
	ents, err := os.ReadDir(s.cache)
	if err != nil || len(ents) <= ociKeep {
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
	for _, d := range dirs[min(ociKeep, len(dirs)):] {
		_ = os.RemoveAll(filepath.Join(s.cache, d.name))
	}
}

// cachedArtifact reads the cached manifest of rev, checking it still is
// the one rev names.
func (s *Source) cachedArtifact(rev string) (oci.Artifact, error) {
	raw, err := os.ReadFile(filepath.Join(s.artifactDir(rev), "manifest.json"))
	if err != nil {
		return oci.Artifact{}, &objectReadError{Err: fmt.Errorf("artifact %s is not cached (Fetch first): %w", shortRev(rev), err)}
	}
	if sum := sha256.Sum256(raw); "sha256:"+hex.EncodeToString(sum[:]) != rev {
		return oci.Artifact{}, &objectReadError{Err: fmt.Errorf("the cached manifest of %s is damaged", shortRev(rev))}
	}
	return oci.Parse(raw, manifestDesc(rev, len(raw)))
}

// ociTree unpacks the cached artifact rev: its root and the configured
// directory. A chart's root is the archive's one top-level directory,
// and its path must be the root.
func (s *Source) ociTree(rev string) (root, dir Dir, a oci.Artifact, err error) {
	if a, err = s.cachedArtifact(rev); err != nil {
		return nil, nil, a, err
	}
	lim := s.cfg.Limits.WithDefaults()
	f, err := os.Open(filepath.Join(s.artifactDir(rev), "layer.tar.gz"))
	if err != nil {
		return nil, nil, a, &objectReadError{Err: fmt.Errorf("read the cached layer of %s: %w", shortRev(rev), err)}
	}
	defer f.Close()
	// The cache holds what the manifest named: a file of another size is
	// damaged, and is not read.
	if fi, err := f.Stat(); err != nil || fi.Size() != a.Layer.Size || a.Layer.Size > lim.MaxBytes {
		return nil, nil, a, &objectReadError{Err: fmt.Errorf("the cached layer of %s is damaged: not the %d bytes its manifest names", shortRev(rev), a.Layer.Size)}
	}
	blob, err := io.ReadAll(io.LimitReader(f, a.Layer.Size))
	if err != nil {
		return nil, nil, a, &objectReadError{Err: fmt.Errorf("read the cached layer of %s: %w", shortRev(rev), err)}
	}
	tree, err := unpackLayer(bytes.NewReader(blob), a.Layer.Digest.String(), lim)
	if err != nil {
		return nil, nil, a, err
	}
	root = tree
	if a.Format == oci.FormatChart {
		ents := tree.Entries()
		if len(ents) != 1 || ents[0].Kind != KindDir {
			return nil, nil, a, &ManifestError{File: "layer", Err: fmt.Errorf("a Helm chart archive holds one directory, the chart; this one holds %d entries", len(ents))}
		}
		if root, err = tree.Dir(ents[0].Name); err != nil {
			return nil, nil, a, err
		}
		if s.dir != "." {
			return nil, nil, a, &ManifestError{File: s.dir, Err: errors.New("a Helm chart artifact is rendered from the chart's root: leave --path empty")}
		}
		if _, err := root.Entry(chartFile); err != nil {
			return nil, nil, a, &ManifestError{File: ents[0].Name + "/" + chartFile, Err: errors.New("a Helm chart artifact without a Chart.yaml")}
		}
	}
	dir = root
	if s.dir != "." {
		d, err := render.ResolveDir(root, s.dir)
		if err != nil || d == nil {
			return nil, nil, a, &ManifestError{File: s.dir, Err: fmt.Errorf("no such directory in the artifact")}
		}
		dir = d
	}
	return root, dir, a, nil
}

// shortRev is a revision cut for messages: a commit's 12 first hex
// digits, or a digest's "sha256:" and 12 hex digits.
func shortRev(rev string) string { return revision.Abbrev(rev, 12) }
