package chartspec

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"path"
	"regexp"
	"strings"
	"time"

	"recond.dev/recond/reconcile/keys"
)

// File is the file whose presence in --path makes it a Helm chart.
const File = "Chart.yaml"

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

// releaseName is Helm's rule for a release name (chartutil's
// ValidateReleaseName: a DNS subdomain of at most maxRelease bytes, so
// that a chart may add ten to it in its objects' names).
var releaseName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

const maxRelease = 53

// ValidateRelease checks name as Helm checks a release name.
func ValidateRelease(name string) error {
	if name == "" {
		return errors.New("no name provided")
	}
	if len(name) > maxRelease || !releaseName.MatchString(name) {
		return fmt.Errorf("invalid release name, must match regex %s and the length must not be longer than %d", releaseName, maxRelease)
	}
	return nil
}

// Validate checks the options.
func (o Options) Validate() error {
	if o.Release != "" {
		if err := ValidateRelease(o.Release); err != nil {
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

// Request is what rendering a chart needs besides the chart itself.
// It crosses the worker's pipe as JSON.
type Request struct {
	Release   string `json:"release"`
	Namespace string `json:"namespace"`
	// Values are repository-relative paths of values files, merged in
	// order over the chart's values.yaml.
	Values []string `json:"values,omitempty"`
	// KubeVersion and APIVersions are .Capabilities; empty: the versions
	// this build of recond knows.
	KubeVersion string   `json:"kubeVersion,omitempty"`
	APIVersions []string `json:"apiVersions,omitempty"`
	// Now is what `now` returns: the commit's time, so that a render is a
	// function of the commit.
	Now time.Time `json:"now"`
	// Seed keys the random functions; nil: they fail with ErrNoSeed.
	Seed []byte `json:"seed,omitempty"`

	// CapsErr is why the capabilities are not known (a kustomization's
	// helmCharts entry then fails with it; a kustomization without one
	// does not need them).
	CapsErr string `json:"capsErr,omitempty"`
}

// Chart is what the status page says of a chart at Config.Path.
type Chart struct {
	Name, Version string
	// Values are the values files (--helm-values).
	Values []string
}

// Label names a chart's render in errors: "helm template <dir>".
func Label(dir string) string { return "helm template " + dir }

// ErrNoSeed is what a chart's random template functions fail with when
// the render has no seed.
var ErrNoSeed = errors.New("random template functions need the instance's seed")

// AnnotationGeneratedInputs records, on a chart's object with
// generated-once fields, what each such field was made from (package
// helm says how).
const AnnotationGeneratedInputs = keys.AnnotationGeneratedInputs

// JSONPointer is path as a JSON pointer (RFC 6901), the key of a field in
// AnnotationGeneratedInputs.
func JSONPointer(path []string) string {
	esc := strings.NewReplacer("~", "~0", "/", "~1")
	var b strings.Builder
	for _, k := range path {
		b.WriteByte('/')
		b.WriteString(esc.Replace(k))
	}
	return b.String()
}

// GeneratedInputsChanged reports whether the generated-once field at path
// of an object is to be made again rather than kept as it is live: the
// desired and the live object's annotations (AnnotationGeneratedInputs)
// both record the field, with different fingerprints.
func GeneratedInputsChanged(desired, live map[string]string, path []string) bool {
	var d, l map[string]string
	if json.Unmarshal([]byte(desired[AnnotationGeneratedInputs]), &d) != nil ||
		json.Unmarshal([]byte(live[AnnotationGeneratedInputs]), &l) != nil {
		return false
	}
	p := JSONPointer(path)
	dv, ok1 := d[p]
	lv, ok2 := l[p]
	return ok1 && ok2 && dv != lv
}
