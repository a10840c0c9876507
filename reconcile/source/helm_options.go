package source

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"path"
	"strings"

	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
)

// Flag names of chart rendering.
const (
	FlagHelmRelease = "helm-release"
	FlagHelmValues  = "helm-values"
)

// HelmOptions are the chart settings a user gives, as flags.
type HelmOptions struct {
	// Release is the release name (.Release.Name); "" means the instance
	// name (--name).
	Release string
	// Values are values files, repository-relative, merged in order over
	// the chart's values.yaml.
	Values []string
}

// BindFlags registers the options' flags on fs.
func (o *HelmOptions) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Release, FlagHelmRelease, "",
		"release name of a chart at --path (.Release.Name; default: --name)")
	fs.Func(FlagHelmValues, "comma-separated values files of a chart at --path, paths from the repository root, merged in order over the chart's values.yaml",
		func(v string) error {
			o.Values = nil
			for _, f := range strings.Split(v, ",") {
				if f = strings.TrimSpace(f); f != "" {
					o.Values = append(o.Values, f)
				}
			}
			return nil
		})
}

// Validate checks the options.
func (o HelmOptions) Validate() error {
	if o.Release != "" {
		if err := chartutil.ValidateReleaseName(o.Release); err != nil {
			return fmt.Errorf("--%s %q: %w", FlagHelmRelease, o.Release, err)
		}
	}
	for _, f := range o.Values {
		if c := path.Clean(f); path.IsAbs(c) || c == ".." || strings.HasPrefix(c, "../") {
			return fmt.Errorf("--%s %q: a path inside the repository, from its root", FlagHelmValues, f)
		}
	}
	return nil
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
