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
		name        string
		files       map[string]string
		chart, kust bool
		label       string
	}{
		{"a chart", map[string]string{"Chart.yaml": "name: x\n", "kustomization.yaml": ""}, true, false, "helm template app"},
		{"a kustomization", map[string]string{"kustomization.yaml": "resources: []\n"}, false, true, "kustomize build app"},
		{"Kustomization", map[string]string{"Kustomization": "resources: []\n"}, false, true, "kustomize build app"},
		{"plain files", map[string]string{"cm.yaml": "kind: ConfigMap\n"}, false, false, "app"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := tree.MemFiles(c.files)
			chart, kust, label := renderKind(d, "app")
			if chart != c.chart || kust != c.kust || label != c.label {
				t.Fatalf("renderKind = %t, %t, %q; want %t, %t, %q", chart, kust, label, c.chart, c.kust, c.label)
			}
		})
	}
}
