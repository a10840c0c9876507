package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"recond.dev/recond/reconcile/source/chartspec"
	"recond.dev/recond/reconcile/source/worker"
)

// A chart at Config.Path is rendered by package helm, in the render
// binary; what recond says of one is package chartspec's, and these are
// its names as the source's callers know them.
type (
	// HelmOptions are the chart settings a user gives, as flags.
	HelmOptions = chartspec.Options
	// Chart is what the status page says of a chart at Config.Path.
	Chart = chartspec.Chart
	// helmRequest is what rendering a chart needs besides the chart.
	helmRequest = chartspec.Request
)

// Flag names of chart rendering.
const (
	FlagHelmRelease = chartspec.FlagRelease
	FlagHelmValues  = chartspec.FlagValues
)

// ErrNoSeed is what a chart's random template functions fail with when
// the render has no seed.
var ErrNoSeed = chartspec.ErrNoSeed

// AnnotationGeneratedInputs records, on a chart's object with
// generated-once fields, what each such field was made from
// (chartspec.AnnotationGeneratedInputs).
const AnnotationGeneratedInputs = chartspec.AnnotationGeneratedInputs

// GeneratedInputsChanged reports whether the generated-once field at path
// of an object is to be made again rather than kept as it is live
// (chartspec.GeneratedInputsChanged).
func GeneratedInputsChanged(desired, live map[string]string, path []string) bool {
	return chartspec.GeneratedInputsChanged(desired, live, path)
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
func (s *Source) withSeed(ctx context.Context, req *helmRequest, render func() (*worker.Result, error)) (*worker.Result, error) {
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
