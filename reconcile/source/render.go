package source

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"recond.dev/recond/reconcile/source/chartspec"
	"recond.dev/recond/reconcile/source/fetch"
	"recond.dev/recond/reconcile/source/manifest"
	"recond.dev/recond/reconcile/source/tree"
	"recond.dev/recond/reconcile/source/worker"
)

// A revision's files become objects in the render binary (package
// renderer); what it hands back is package manifest's, and these are its
// names as the source's callers know them.
type (
	// Manifest is one Kubernetes object read from the repository.
	Manifest = manifest.Manifest
	// ManifestError reports a manifest that cannot be read or is not a
	// valid object.
	ManifestError = manifest.ManifestError
	// Limits bound the work a commit can make rendering do.
	Limits = manifest.Limits
	// LimitError reports a render that exceeded one of its Limits.
	LimitError = manifest.LimitError
	// DecryptError is a SOPS-encrypted file that could not be decrypted.
	DecryptError = manifest.DecryptError
)

// DefaultLimits are the limits used for zero fields of Limits.
var DefaultLimits = manifest.DefaultLimits

// Names of the limits, as LimitError.Limit reports them.
const (
	LimitBytes          = manifest.LimitBytes
	LimitObjects        = manifest.LimitObjects
	LimitFileBytes      = manifest.LimitFileBytes
	LimitDepth          = manifest.LimitDepth
	LimitAliasExpansion = manifest.LimitAliasExpansion
	LimitMemory         = manifest.LimitMemory
	LimitFiles          = manifest.LimitFiles
)

// Render reads the manifests under Config.Path at commit sha (a full SHA,
// normally from Fetch). For a remote repository the commit must be in the
// cache, i.e. Fetch must have returned it.
//
// The render runs in the render binary (Config.Worker), which checks that
// each object has apiVersion, kind and metadata.name, that its numbers are
// exact and that the render stays within Config.Limits; namespaces,
// duplicates and scope are the caller's concern. The render opens no
// network connection; the process it runs in is killed soon after ctx is
// done.
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

// render sends the revision's tree to the renderer and keeps what the
// loop asks of the render later: the values it decrypted, the chart.
func (s *Source) render(ctx context.Context, t *fetch.Tree) ([]Manifest, error) {
	sha := t.Rev
	r := s.renderer()
	if r == nil {
		return nil, errors.New("source: no renderer (Config.Worker)")
	}
	keys, keysErr := manifest.ReadKeys(s.cfg.SOPSAgeKeysFile)
	job := worker.Job{Tree: t.Reopen, Rev: sha, Dir: s.dir, Limits: s.cfg.Limits, Keys: keys, KeysFile: s.cfg.SOPSAgeKeysFile}
	if keysErr != nil {
		job.KeysErr = keysErr.Error()
	}
	var kust bool
	job.Chart, kust, job.Label = renderKind(t.Dir, s.dir)
	var req helmRequest
	if job.Chart || kust {
		// What a chart, or a kustomization's helmCharts entry, needs.
		var err error
		req, err = s.helmRequest(ctx, t.Time)
		var capsErr *capabilitiesError
		if errors.As(err, &capsErr) && !job.Chart {
			// Only a kustomization's helmCharts entry needs them: it
			// fails with this error.
			req.CapsErr, err = err.Error(), nil
		}
		if err != nil {
			return nil, err
		}
	}
	res, err := s.withSeed(ctx, &req, func() (*worker.Result, error) {
		if job.Chart || kust {
			job.Helm = &req
		}
		return r.Render(ctx, job)
	})
	if err != nil {
		return nil, err
	}
	at := sensitiveAt{sha: sha, values: res.Sensitive}
	if s.cfg.SOPSAgeKeysFile != "" {
		fp := manifest.Fingerprint(keys, keysErr)
		at.keys = &fp
	}
	s.mu.Lock()
	s.keepSensitive(at)
	if res.Chart != nil {
		ch := *res.Chart
		ch.Values = slices.Clone(s.cfg.Helm.Values)
		s.chart = chartAt{sha: sha, chart: &ch}
	}
	s.mu.Unlock()
	if log := s.cfg.Helm.Log; log != nil && len(res.CRDs)+len(res.Hooks) > 0 {
		log.InfoContext(ctx, "chart render left out what a namespaced instance does not apply (see docs/helm.md): CRDs, and test, rollback and delete hooks",
			"revision", shortRev(sha), "crds", res.CRDs, "hooks", res.Hooks)
	}
	return res.Manifests, nil
}

// renderer is what renders the source's revisions: the render binary
// (Config.Worker), else Config.Renderer.
func (s *Source) renderer() Renderer {
	if s.cfg.Worker != nil {
		return s.cfg.Worker
	}
	return s.cfg.Renderer
}

// kustomizationFiles are the names of a kustomization file (package
// renderer's tests check that they are kustomize's own).
var kustomizationFiles = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

// renderKind tells how the directory dir (d) renders, and the name its
// render's errors go by: a chart (a Chart.yaml there), a kustomization,
// or plain files (neither).
func renderKind(d tree.Dir, dir string) (chart, kustomization bool, label string) {
	isFile := func(name string) bool {
		e, err := d.Entry(name)
		return err == nil && (e.Kind == KindFile || e.Kind == KindSymlink)
	}
	if isFile(chartspec.File) {
		return true, false, chartspec.Label(dir)
	}
	for _, name := range kustomizationFiles {
		if isFile(name) {
			return false, true, "kustomize build " + dir
		}
	}
	return false, false, dir
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
	return manifest.KeysFingerprint(s.cfg.SOPSAgeKeysFile) != *used
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
	return manifest.KeysFingerprint(s.cfg.SOPSAgeKeysFile)
}
