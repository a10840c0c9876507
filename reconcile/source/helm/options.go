package helm

import (
	"flag"
	"fmt"
	"path"
	"strings"

	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
)

// Flag names of chart rendering.
const (
	FlagRelease = "helm-release"
	FlagValues  = "helm-values"
)

// Options are the chart settings a user gives, as flags.
type Options struct {
	// Release is the release name (.Release.Name); "" means the instance
	// name (--name).
	Release string
	// Values are values files, repository-relative, merged in order over
	// the chart's values.yaml.
	Values []string
}

// BindFlags registers the options' flags on fs.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Release, FlagRelease, "",
		"release name of a chart at --path (.Release.Name; default: --name)")
	fs.Func(FlagValues, "comma-separated values files of a chart at --path, paths from the repository root, merged in order over the chart's values.yaml",
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
func (o Options) Validate() error {
	if o.Release != "" {
		if err := chartutil.ValidateReleaseName(o.Release); err != nil {
			return fmt.Errorf("--%s %q: %w", FlagRelease, o.Release, err)
		}
	}
	for _, f := range o.Values {
		if c := path.Clean(f); path.IsAbs(c) || c == ".." || strings.HasPrefix(c, "../") {
			return fmt.Errorf("--%s %q: a path inside the repository, from its root", FlagValues, f)
		}
	}
	return nil
}
