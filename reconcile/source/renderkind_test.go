package source

import (
	"slices"
	"testing"

	"recond.dev/recond/reconcile/source/kustomize"
	"recond.dev/recond/reconcile/source/tree"
)

// TestKustomizationFilesAreKustomizes: recond tells a kustomization by the
// file names kustomize itself recognizes, without linking kustomize.
func TestKustomizationFilesAreKustomizes(t *testing.T) {
	if !slices.Equal(kustomizationFiles, kustomize.Files) {
		t.Fatalf("kustomizationFiles = %q; kustomize recognizes %q", kustomizationFiles, kustomize.Files)
	}
}

// TestRenderKind: how a directory renders, and the name its errors go by.
func TestRenderKind(t *testing.T) {
	for _, c := range []struct {
		name  string
		files map[string]string
		chart bool
		label string
	}{
		{"a chart", map[string]string{"Chart.yaml": "name: x\n", "kustomization.yaml": ""}, true, "helm template app"},
		{"a kustomization", map[string]string{"kustomization.yaml": "resources: []\n"}, false, "kustomize build app"},
		{"Kustomization", map[string]string{"Kustomization": "resources: []\n"}, false, "kustomize build app"},
		{"plain files", map[string]string{"cm.yaml": "kind: ConfigMap\n"}, false, "app"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := tree.MemFiles(c.files)
			chart, label := renderKind(d, "app")
			if chart != c.chart || label != c.label {
				t.Fatalf("renderKind = %t, %q; want %t, %q", chart, label, c.chart, c.label)
			}
		})
	}
}
