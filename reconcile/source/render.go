package source

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"recond.dev/recond/reconcile/source/fetch"
	"recond.dev/recond/reconcile/source/helm"
	"recond.dev/recond/reconcile/source/kustomize"
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
	t, err := s.f.Open(sha)
	var re *fetch.RevisionError
	if errors.As(err, &re) {
		return nil, fmt.Errorf("render %s: %w", s.display, err)
	}
	sha = strings.ToLower(sha)
	var ms []Manifest
	if err == nil {
		defer t.Close() // the source's cache stays as it is until then
		ms, err = s.render(ctx, t)
	}
	if err != nil {
		s.renderFailed(sha, err)
		return nil, fmt.Errorf("render %s at %s: %w", s.display, shortRev(sha), withReason(err))
	}
	return ms, nil
}

func (s *Source) render(ctx context.Context, t *fetch.Tree) ([]Manifest, error) {
	sha := t.Rev
	b := render.NewBudget(s.cfg.Limits)
	b.ReadKeys(s.cfg.SOPSAgeKeysFile)
	ms, err := s.renderWith(ctx, t, b)
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
// the tree's time is the revision's (a chart's `now`).
func (s *Source) renderWith(ctx context.Context, t *fetch.Tree, b *render.Budget) ([]Manifest, error) {
	if e, err := t.Dir.Entry(helm.ChartFile); err == nil && (e.Kind == KindFile || e.Kind == KindSymlink) {
		return s.helm(ctx, t, b)
	}
	for _, name := range kustomize.Files {
		if e, err := t.Dir.Entry(name); err == nil && (e.Kind == KindFile || e.Kind == KindSymlink) {
			return s.kustomize(ctx, t, b)
		}
	}
	return render.Plain(ctx, t.Root, t.Dir, s.dir, b)
}

// kustomize builds the kustomization at s.dir and decodes what it produced.
// With a Worker configured, the build runs in a worker process (see
// worker.go) that is killed when ctx is done; otherwise it runs in-process
// (kustomize.InProcess).
func (s *Source) kustomize(ctx context.Context, t *fetch.Tree, b *render.Budget) ([]Manifest, error) {
	label := kustomize.Label(s.dir)
	req, err := s.helmRequest(ctx, t.Time)
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
			return s.renderInWorker(ctx, t, b, label, &req, false)
		}
		b.SetBytesRead(read) // a render again with the seed reads the same files: count them once
		return kustomize.InProcess(ctx, t.Root, s.dir, b, req)
	})
	if err != nil {
		return nil, err
	}
	return b.Decode(label, out)
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
