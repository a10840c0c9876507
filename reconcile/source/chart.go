package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"recond.dev/recond/reconcile/source/fetch"
	"recond.dev/recond/reconcile/source/helm"
	"recond.dev/recond/reconcile/source/render"
)

// A chart at Config.Path is rendered by package helm; these are its names
// as the source's callers know them.
type (
	// HelmOptions are the chart settings a user gives, as flags.
	HelmOptions = helm.Options
	// Chart is what the status page says of a chart at Config.Path.
	Chart = helm.Chart
	// helmRequest is what rendering a chart needs besides the chart.
	helmRequest = helm.Request
)

// Flag names of chart rendering.
const (
	FlagHelmRelease = helm.FlagRelease
	FlagHelmValues  = helm.FlagValues
)

// ErrNoSeed is what a chart's random template functions fail with when
// the render has no seed.
var ErrNoSeed = helm.ErrNoSeed

// AnnotationGeneratedInputs records, on a chart's object with
// generated-once fields, what each such field was made from
// (helm.AnnotationGeneratedInputs).
const AnnotationGeneratedInputs = helm.AnnotationGeneratedInputs

// GeneratedInputsChanged reports whether the generated-once field at path
// of an object is to be made again rather than kept as it is live
// (helm.GeneratedInputsChanged).
func GeneratedInputsChanged(desired, live map[string]string, path []string) bool {
	return helm.GeneratedInputsChanged(desired, live, path)
}

// Helm is how a chart at Config.Path is rendered.
type Helm struct {
	HelmOptions
	// Namespace is .Release.Namespace: recond's namespace.
	Namespace string
	// Seed returns the instance's secret seed for the random template
	// functions; nil: they fail with ErrNoSeed.
	Seed func(ctx context.Context) ([]byte, error)
	// Capabilities returns the API server's version and API versions
	// (.Capabilities); nil: the versions this build knows.
	Capabilities func(ctx context.Context) (version string, apiVersions []string, err error)
	// Log receives one line per rendered revision naming what a chart's
	// render left out (CRDs, hooks).
	Log *slog.Logger
}

// helm renders the chart at s.dir, in a worker process when one is
// configured (killed when ctx is done), and decodes each template's
// output under the template's name.
func (s *Source) helm(ctx context.Context, t *fetch.Tree, b *render.Budget) ([]Manifest, error) {
	sha := t.Rev
	req, err := s.helmRequest(ctx, t.Time)
	if err != nil {
		return nil, err
	}
	read := b.BytesRead()
	out, err := s.withSeed(ctx, &req, func() ([]byte, error) {
		if s.cfg.Worker != nil {
			return s.renderInWorker(ctx, t, b, helm.Label(s.dir), &req, true)
		}
		b.SetBytesRead(read) // a render again with the seed reads the same files: count them once
		return render.InGoroutine(ctx, func() ([]byte, error) { return helm.Build(ctx, t.Root, s.dir, b, req) })
	})
	if err != nil {
		return nil, err
	}
	docs, chart, crds, hooks := helm.SplitOutput(out)
	chart.Values = slices.Clone(s.cfg.Helm.Values)
	s.mu.Lock()
	s.chart = chartAt{sha: sha, chart: &chart}
	s.mu.Unlock()
	if log := s.cfg.Helm.Log; log != nil && len(crds)+len(hooks) > 0 {
		log.InfoContext(ctx, "chart render left out what a namespaced instance does not apply (see docs/helm.md): CRDs, and test, rollback and delete hooks",
			"revision", shortRev(sha), "crds", crds, "hooks", hooks)
	}
	var ms []Manifest
	for _, d := range docs {
		m, err := b.Decode(d.Source, d.Content)
		if err != nil {
			return nil, err
		}
		for i := range m {
			d.Meta.Apply(&m[i])
		}
		ms = append(ms, m...)
	}
	return ms, nil
}

// chartAt is the chart of the last revision rendered as one.
type chartAt struct {
	sha   string
	chart *Chart
}

// Chart is the chart revision sha rendered as, when it was the last
// revision rendered and a chart; nil otherwise.
func (s *Source) Chart(sha string) *Chart {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.chart.sha != sha {
		return nil
	}
	return s.chart.chart
}

// helmRequest gathers what a chart's render needs from outside the chart:
// the release, the values files, the cluster's capabilities and the
// revision's time, now (the seed is asked for when a render needs it:
// withSeed).
func (s *Source) helmRequest(ctx context.Context, now time.Time) (helmRequest, error) {
	h := s.cfg.Helm
	req := helmRequest{Release: h.Release, Namespace: h.Namespace, Values: h.Values, Now: now}
	if req.Release == "" {
		req.Release = "release-name"
	}
	var err error
	if h.Capabilities != nil {
		if req.KubeVersion, req.APIVersions, err = h.Capabilities(ctx); err != nil {
			return req, &capabilitiesError{err}
		}
	}
	return req, nil
}

// capabilitiesError is the API server not telling its capabilities.
type capabilitiesError struct{ err error }

func (e *capabilitiesError) Error() string {
	return "the API server's capabilities, for the chart: " + e.err.Error()
}
func (e *capabilitiesError) Unwrap() error { return e.err }

// withSeed runs render, and once more with the instance's seed when a
// chart's random function asked for it: the seed Secret is read (or made)
// only for charts that use one.
func (s *Source) withSeed(ctx context.Context, req *helmRequest, render func() ([]byte, error)) ([]byte, error) {
	s.mu.Lock()
	req.Seed = s.seed // known once a render needed it
	s.mu.Unlock()
	out, err := render()
	if !errors.Is(err, ErrNoSeed) || s.cfg.Helm.Seed == nil || len(req.Seed) > 0 {
		return out, err
	}
	if req.Seed, err = s.cfg.Helm.Seed(ctx); err != nil {
		return nil, fmt.Errorf("the instance's seed, for the chart: %w", err)
	}
	s.mu.Lock()
	s.seed = req.Seed
	s.mu.Unlock()
	return render()
}
