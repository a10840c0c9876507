// Package sealed is where the program that embeds this copy of kustomize
// renders what kustomize would have run a process for: a kustomization's
// helmCharts. It is not part of upstream kustomize.
package sealed

// HelmRequest is one helmCharts entry, resolved by kustomize's loader.
type HelmRequest struct {
	// ChartDir is the chart's directory in kustomize's file system
	// (helmGlobals.chartHome, then the chart's name).
	ChartDir string
	// ReleaseName and Namespace are the entry's (empty: the renderer's
	// defaults).
	ReleaseName, Namespace string
	// Values are the values documents, merged in order: valuesFile (or the
	// chart's values.yaml) with valuesInline merged as valuesMerge says,
	// then additionalValuesFiles.
	Values [][]byte
	// IncludeCRDs, SkipHooks and SkipTests are the entry's.
	IncludeCRDs, SkipHooks, SkipTests bool
	// KubeVersion and APIVersions are the entry's (empty: the renderer's).
	KubeVersion string
	APIVersions []string
}

// HelmTemplate renders a chart as `helm template` would, returning its
// YAML. nil (the default) refuses every helmCharts entry.
var HelmTemplate func(HelmRequest) ([]byte, error)
