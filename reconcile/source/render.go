package source

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/sealed"

	"recond.dev/recond/reconcile/source/helm"
	"recond.dev/recond/reconcile/source/render"
)

// A revision's files become objects in package render (and the chart and
// kustomize renderers above it); these are its names as the source's
// callers know them.
type (
	// Manifest is one Kubernetes object read from the repository.
	Manifest = render.Manifest
	// ManifestError reports a manifest that cannot be read or is not a
	// valid object.
	ManifestError = render.ManifestError
	// Limits bound the work a commit can make rendering do.
	Limits = render.Limits
	// LimitError reports a render that exceeded one of its Limits.
	LimitError = render.LimitError
	// DecryptError is a SOPS-encrypted file that could not be decrypted.
	DecryptError = render.DecryptError
)

// DefaultLimits are the limits used for zero fields of Limits.
var DefaultLimits = render.DefaultLimits

// Names of the limits, as LimitError.Limit reports them.
const (
	LimitBytes          = render.LimitBytes
	LimitObjects        = render.LimitObjects
	LimitFileBytes      = render.LimitFileBytes
	LimitDepth          = render.LimitDepth
	LimitAliasExpansion = render.LimitAliasExpansion
	LimitMemory         = render.LimitMemory
	LimitFiles          = render.LimitFiles
)

// newLimitError is render.NewLimitError.
func newLimitError(limit string, value, max int64, file string) *ManifestError {
	return render.NewLimitError(limit, value, max, file)
}

// Render reads the manifests under Config.Path at commit sha (a full SHA,
// normally from Fetch). For a remote repository the commit must be in the
// cache, i.e. Fetch must have returned it.
//
// Render checks that each object has apiVersion, kind and metadata.name,
// that its numbers are exact and that the render stays within
// Config.Limits; namespaces, duplicates and scope are the caller's concern.
// It never opens a network connection or starts a process, and returns
// soon after ctx is done.
func (s *Source) Render(ctx context.Context, sha string) ([]Manifest, error) {
	if !s.isRevision(sha) {
		what := "a full commit SHA"
		if s.kind == kindOCI {
			what = "a sha256: manifest digest"
		}
		return nil, fmt.Errorf("render %s: %q is not %s", s.display, sha, what)
	}
	sha = strings.ToLower(sha)
	if s.kind != kindLocal {
		mu := cacheLock(s.cache)
		mu.RLock()
		defer mu.RUnlock()
	}
	ms, err := s.render(ctx, sha)
	if err != nil {
		s.renderFailed(sha, err)
		return nil, fmt.Errorf("render %s at %s: %w", s.display, shortRev(sha), withReason(err))
	}
	return ms, nil
}

func (s *Source) render(ctx context.Context, sha string) ([]Manifest, error) {
	now, root, dir, err := s.tree(sha)
	if err != nil {
		return nil, err
	}
	b := render.NewBudget(s.cfg.Limits)
	b.ReadKeys(s.cfg.SOPSAgeKeysFile)
	ms, err := s.renderWith(ctx, now, sha, root, dir, b)
	if err != nil {
		return nil, b.Safe(err) // no error quotes a secret value (render.Secrets)
	}
	at := sensitiveAt{sha: sha, values: b.SecretValues()}
	if s.cfg.SOPSAgeKeysFile != "" {
		fp := b.KeysFingerprint()
		at.keys = &fp
	}
	s.mu.Lock()
	s.keepSensitive(at)
	s.mu.Unlock()
	return ms, nil
}

// renderWith renders the revision's chart, kustomization or plain files;
// now is the revision's time (a chart's `now`).
func (s *Source) renderWith(ctx context.Context, now time.Time, sha string, root, dir Dir, b *render.Budget) ([]Manifest, error) {
	if e, err := dir.Entry(helm.ChartFile); err == nil && (e.Kind == KindFile || e.Kind == KindSymlink) {
		return s.helm(ctx, now, sha, root, b)
	}
	for _, name := range kustomizationFiles {
		if e, err := dir.Entry(name); err == nil && (e.Kind == KindFile || e.Kind == KindSymlink) {
			return s.kustomize(ctx, now, sha, root, b)
		}
	}
	return render.Plain(ctx, root, dir, s.dir, b)
}

// tree opens the revision and returns its time (a commit's committer
// time; an artifact's, when it was made, as its manifest says) and its
// files: the root and the configured directory.
func (s *Source) tree(sha string) (time.Time, Dir, Dir, error) {
	if s.kind == kindOCI {
		root, dir, a, err := s.ociTree(sha)
		return a.Created, root, dir, err
	}
	repo, err := s.open()
	if err != nil {
		return time.Time{}, nil, nil, err
	}
	commit, err := repo.CommitObject(plumbing.NewHash(sha))
	if err != nil {
		return time.Time{}, nil, nil, fmt.Errorf("commit %s: %w", sha, err)
	}
	root, err := commit.Tree()
	if err != nil {
		return time.Time{}, nil, nil, fmt.Errorf("commit %s: %w", sha, err)
	}
	var dir *object.Tree = root
	if s.dir != "." {
		if dir, err = root.Tree(s.dir); err != nil {
			if errors.Is(err, object.ErrDirectoryNotFound) {
				return time.Time{}, nil, nil, &ManifestError{File: s.dir, Err: err}
			}
			return time.Time{}, nil, nil, fmt.Errorf("%s: %w", s.dir, err)
		}
	}
	return commit.Committer.When.UTC(), gitDir{root}, gitDir{dir}, nil
}

// kustomizeMu serialises kustomize runs: kustomize keeps global state (its
// OpenAPI schema).
var kustomizeMu sync.Mutex

// kustomize builds the kustomization at s.dir and decodes what it produced.
// With a Worker configured, the build runs in a worker process (see
// worker.go) that is killed when ctx is done; otherwise it runs in-process.
func (s *Source) kustomize(ctx context.Context, now time.Time, sha string, root Dir, b *render.Budget) ([]Manifest, error) {
	label := kustomizeLabel(s.dir)
	req, err := s.helmRequest(ctx, now)
	var capsErr *capabilitiesError
	if errors.As(err, &capsErr) {
		// Only a helmCharts entry needs them: it fails with this error.
		req.CapsErr, err = err.Error(), nil
	}
	if err != nil {
		return nil, err
	}
	read := b.BytesRead()
	out, err := s.withSeed(ctx, &req, func() ([]byte, error) {
		if s.cfg.Worker != nil {
			return s.renderInWorker(ctx, sha, b, label, &req, false)
		}
		b.SetBytesRead(read) // a render again with the seed reads the same files: count them once
		return kustomizeInProcess(ctx, root, s.dir, b, req)
	})
	if err != nil {
		return nil, err
	}
	return b.Decode(label, out)
}

func kustomizeLabel(dir string) string { return "kustomize build " + dir }

// kustomizeInProcess runs kustomizeBuild in a goroutine of its own so that
// it returns as soon as ctx is done; the file system then fails its next
// read, which stops kustomize, but a build that computes without reading
// goes on (and holds kustomizeMu) until it ends: the worker process is the
// way to stop one.
func kustomizeInProcess(ctx context.Context, root Dir, dir string, b *render.Budget, req helmRequest) ([]byte, error) {
	return render.InGoroutine(ctx, func() ([]byte, error) {
		kustomizeMu.Lock()
		defer kustomizeMu.Unlock()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// Once ctx is done, the file system fails its next read.
		return kustomizeBuild(ctx, root, dir, b, req)
	})
}

// kustomizeBuild builds the kustomization at dir with the sealed kustomize
// (no network, no processes, no plugins but the builtin ones) reading
// lazily from the commit's tree through a read-only, bounded file system,
// and returns its YAML output, bounded by MaxObjects and MaxBytes. Every
// error is a *ManifestError, or ctx's.
func kustomizeBuild(ctx context.Context, root Dir, dir string, b *render.Budget, req helmRequest) (out []byte, err error) {
	label := kustomizeLabel(dir)
	defer func() { err = b.Safe(err) }() // last: no error quotes a secret value (secrets.go)
	defer func() {
		// A panic in kustomize (some malformed kustomizations reach one)
		// must not end the process: fail the render.
		if p := recover(); p != nil {
			out, err = nil, render.Fault(fmt.Errorf("kustomize failed: %v", p), label)
		}
	}()
	tfs := render.NewFS(ctx, root, b)
	if err := checkKustomizations(tfs, dir); err != nil {
		return nil, render.Fault(err, label)
	}
	// A kustomization's helmCharts are rendered by recond's chart renderer,
	// from the repository, sealed as a chart at --path is (helm.go). Set
	// here, under kustomizeMu (or alone in a worker process).
	var noSeed error
	sealed.HelmTemplate = func(hr sealed.HelmRequest) ([]byte, error) {
		out, err := helm.KustomizeChart(ctx, tfs, req, hr)
		if errors.Is(err, ErrNoSeed) {
			noSeed = err
		}
		return out, err
	}
	defer func() { sealed.HelmTemplate = nil }()
	// The default options allow builtin plugins only and restrict loads to
	// the kustomization's root; the helm "command" is never run.
	opts := krusty.MakeDefaultOptions()
	opts.PluginConfig.HelmConfig.Enabled, opts.PluginConfig.HelmConfig.Command = true, "recond"
	resources, err := krusty.MakeKustomizer(opts).Run(tfs, render.Abs(dir))
	if noSeed != nil {
		return nil, &ManifestError{File: label, Err: noSeed}
	}
	if err == nil {
		if n := resources.Size(); n > b.Limits().MaxObjects {
			return nil, newLimitError(LimitObjects, int64(n), int64(b.Limits().MaxObjects), label)
		}
		out, err = resources.AsYaml()
	}
	if err != nil {
		if fault := tfs.Err(); fault != nil {
			return nil, render.Fault(fault, label)
		}
		return nil, render.Fault(err, label)
	}
	if n := int64(len(out)); n > b.Limits().MaxBytes {
		return nil, newLimitError(LimitBytes, n, b.Limits().MaxBytes, label)
	}
	return out, nil
}

// SensitiveValues are the values a render of sha decrypted that are secret
// wherever they appear (a Helm values file's encrypted values, which a
// template may copy into any object; a decrypted Secret's data, which a
// kustomize replacement may copy), each once; nil when sha is not among
// the last revisions rendered or decrypted nothing.
func (s *Source) SensitiveValues(sha string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if at := s.sensitiveOf(sha); at != nil {
		return at.values
	}
	return nil
}

// KeysChanged reports whether the age keys file differs from what the
// last render of sha read. The loop renders again on demand (a manual
// tick) when it does.
func (s *Source) KeysChanged(sha string) bool {
	s.mu.Lock()
	var used *[32]byte
	if at := s.sensitiveOf(sha); at != nil {
		used = at.keys
	}
	s.mu.Unlock()
	if used == nil || s.cfg.SOPSAgeKeysFile == "" {
		return false
	}
	return render.KeysFingerprint(s.cfg.SOPSAgeKeysFile) != *used
}

// keptRenders is how many revisions' decryptions a Source remembers: two
// renders may run at once (one abandoned by its tick, one of a newer
// revision), and neither may lose what the other decrypted.
const keptRenders = 4

// sensitiveOf is what the last render of sha decrypted, or nil; s.mu held.
func (s *Source) sensitiveOf(sha string) *sensitiveAt {
	for i := len(s.sensitive) - 1; i >= 0; i-- {
		if s.sensitive[i].sha == sha {
			return &s.sensitive[i]
		}
	}
	return nil
}

// keepSensitive remembers what a render decrypted; s.mu held.
func (s *Source) keepSensitive(at sensitiveAt) {
	s.sensitive = slices.DeleteFunc(s.sensitive, func(o sensitiveAt) bool { return o.sha == at.sha })
	s.sensitive = append(s.sensitive, at)
	if n := len(s.sensitive); n > keptRenders {
		s.sensitive = slices.Delete(s.sensitive, 0, n-keptRenders)
	}
}

// sensitiveAt is what a render decrypted.
type sensitiveAt struct {
	sha    string
	values []string
	keys   *[32]byte // the keys file's fingerprint, when one is configured
}

// KeysFingerprint is a fingerprint of the age keys file as it reads now
// (zero without one): the loop renders a revision whose render failed
// again once it changes (the keys Secret was updated), and not before.
func (s *Source) KeysFingerprint() [32]byte {
	if s.cfg.SOPSAgeKeysFile == "" {
		return [32]byte{}
	}
	return render.KeysFingerprint(s.cfg.SOPSAgeKeysFile)
}
