package helm

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"recond.dev/recond/reconcile/source/chartspec"
	"recond.dev/recond/reconcile/source/render"
	"recond.dev/recond/reconcile/source/tree"
)

// TestBuildAndSplit: a chart of any tree renders, and SplitOutput reads
// Build's output back: the chart, each template's document with what
// recond says of it, and what was left out (crds/, a test hook).
func TestBuildAndSplit(t *testing.T) {
	root := tree.MemFiles(map[string]string{
		"app/Chart.yaml":          "apiVersion: v2\nname: app\nversion: 1.2.3\n",
		"app/values.yaml":         "name: a\n",
		"app/crds/crd.yaml":       "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: x.example.com\n",
		"app/templates/cm.yaml":   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Values.name }}\ndata:\n  now: {{ now | date \"2006\" | quote }}\n",
		"app/templates/hook.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: pre\n  annotations:\n    helm.sh/hook: pre-install\n",
		"app/templates/test.yaml": "apiVersion: v1\nkind: Pod\nmetadata:\n  name: t\n  annotations:\n    helm.sh/hook: test\n",
	})
	req := Request{Request: chartspec.Request{Release: "r", Namespace: "ns", Now: time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)}}
	out, err := Build(context.Background(), root, "app", render.NewBudget(render.DefaultLimits), req)
	if err != nil {
		t.Fatal(err)
	}
	docs, chart, crds, hooks := SplitOutput(out)
	if d := cmp.Diff(Chart{Name: "app", Version: "1.2.3"}, chart); d != "" {
		t.Errorf("chart (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"app/crds/crd.yaml"}, crds); d != "" {
		t.Errorf("crds left out (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"Pod/t (test)"}, hooks); d != "" {
		t.Errorf("hooks left out (-want +got):\n%s", d)
	}
	var got []string
	for _, d := range docs {
		got = append(got, d.Source)
		if d.Source == "app/templates/cm.yaml" && !strings.Contains(string(d.Content), `now: "2024"`) {
			t.Errorf("cm.yaml: now is not the revision's time:\n%s", d.Content)
		}
		if hook := d.Source == "app/templates/hook.yaml"; d.Meta.Hook != hook {
			t.Errorf("%s: Hook = %t", d.Source, d.Meta.Hook)
		}
	}
	if d := cmp.Diff([]string{"app/templates/cm.yaml", "app/templates/hook.yaml"}, got); d != "" {
		t.Errorf("documents (-want +got):\n%s", d)
	}
}

// TestGeneratedInputsChanged: a field is made again only when both sides
// record it, with different fingerprints.
func TestGeneratedInputsChanged(t *testing.T) {
	rec := func(fp string) map[string]string {
		return map[string]string{AnnotationGeneratedInputs: `{"/data/tls.crt":"` + fp + `"}`}
	}
	path := []string{"data", "tls.crt"}
	for _, tc := range []struct {
		name          string
		desired, live map[string]string
		path          []string
		want          bool
	}{
		{"same", rec("a"), rec("a"), path, false},
		{"changed", rec("a"), rec("b"), path, true},
		{"live records none", rec("a"), nil, path, false},
		{"another field", rec("a"), rec("b"), []string{"data", "tls.key"}, false},
	} {
		if got := GeneratedInputsChanged(tc.desired, tc.live, tc.path); got != tc.want {
			t.Errorf("%s: %t, want %t", tc.name, got, tc.want)
		}
	}
	if got := chartspec.JSONPointer([]string{"a/b", "c~d"}); got != "/a~1b/c~0d" {
		t.Errorf("JSONPointer = %q", got)
	}
}
