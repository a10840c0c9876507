package source

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
)

// BenchmarkKustomizeRender renders an overlay of n ConfigMaps and n
// Deployments (a base, a name prefix, labels and one patch per kind)
// in-process and in a worker process: the worker's cost per revision is
// its start (exec, the runtime, reading the clone) and the pipe.
//
//	go test -run XXX -bench KustomizeRender -benchtime 20x ./reconcile/source/
func BenchmarkKustomizeRender(b *testing.B) {
	for _, n := range []int{3, 250} {
		var base strings.Builder
		for i := range n {
			fmt.Fprintf(&base, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c%d\ndata:\n  k: v\n", i)
			fmt.Fprintf(&base, "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d%d\nspec:\n  selector:\n    matchLabels: {app: d%d}\n  template:\n    metadata:\n      labels: {app: d%d}\n    spec:\n      containers:\n      - name: c\n        image: nginx:1.27\n", i, i, i)
		}
		files := map[string]string{
			"base/kustomization.yaml": "resources:\n- all.yaml\n",
			"base/all.yaml":           base.String(),
			"app/kustomization.yaml": "resources:\n- ../base\nnamePrefix: team-\nlabels:\n- pairs: {team: a}\npatches:\n" +
				"- target: {kind: Deployment}\n  patch: '[{\"op\": \"add\", \"path\": \"/spec/replicas\", \"value\": 2}]'\n" +
				"- target: {kind: ConfigMap}\n  patch: '[{\"op\": \"add\", \"path\": \"/data/extra\", \"value\": \"x\"}]'\n",
		}
		dir := b.TempDir()
		sha := newTestRepo(b, dir).commit(files)
		for _, worker := range []bool{false, true} {
			name := fmt.Sprintf("objects=%d/in-process", 2*n)
			cfg := Config{URL: dir, Path: "app", Renderer: inProcess}
			if worker {
				name = fmt.Sprintf("objects=%d/worker", 2*n)
				exe, _ := os.Executable()
				cfg.Worker = &Worker{Path: exe}
			}
			s, err := New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.Run(name, func(b *testing.B) {
				for b.Loop() {
					ms, err := s.Render(context.Background(), sha)
					if err != nil || len(ms) != 2*n {
						b.Fatalf("Render = %d objects, %v", len(ms), err)
					}
				}
			})
		}
	}
}

// BenchmarkHelmRender renders a chart of n Deployments, n Services and n
// ConfigMaps (three templates ranging over a list in the values, helpers,
// a vendored dependency) in-process and in a worker process, the way
// recond renders a chart once per revision.
//
//	go test -run XXX -bench HelmRender -benchtime 20x ./reconcile/source/
func BenchmarkHelmRender(b *testing.B) {
	for _, n := range []int{1, 100} {
		var items strings.Builder
		for i := range n {
			fmt.Fprintf(&items, "- name: app%d\n  image: nginx:1.27\n", i)
		}
		files := helmChart()
		files["app/values.yaml"] = "replicas: 1\nimage: nginx:1\nsub:\n  greeting: hello\napps:\n" + items.String()
		files["app/templates/many.yaml"] = `{{- range .Values.apps }}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "app.fullname" $ }}-{{ .name }}
spec:
  replicas: {{ $.Values.replicas }}
  selector: {matchLabels: {app: {{ .name }}}}
  template:
    metadata: {labels: {app: {{ .name }}}}
    spec:
      containers: [{name: c, image: {{ .image | quote }}}]
---
apiVersion: v1
kind: Service
metadata:
  name: {{ .name }}
spec:
  selector: {app: {{ .name }}}
  ports: [{port: 80}]
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .name }}-config
data:
  password: {{ randAlphaNum 16 | quote }}
{{- end }}
`
		dir := b.TempDir()
		sha := newTestRepo(b, dir).commit(files)
		want := 3*n + 4
		for _, worker := range []bool{false, true} {
			name := fmt.Sprintf("objects=%d/in-process", want)
			var w *Worker
			if worker {
				name = fmt.Sprintf("objects=%d/worker", want)
				exe, _ := os.Executable()
				w = &Worker{Path: exe}
			}
			s := mustNew(b, helmConfig(dir, w, []byte("seed")))
			b.Run(name, func(b *testing.B) {
				for b.Loop() {
					ms, err := s.Render(context.Background(), sha)
					if err != nil || len(ms) != want {
						b.Fatalf("Render = %d objects, %v", len(ms), err)
					}
				}
			})
		}
	}
}

// BenchmarkPlainRender reads n plain ConfigMaps in-process and in the
// render binary (here the test binary, as recond starts recond-render):
// what a revision of plain files costs now that every render runs there.
//
//	go test -run XXX -bench PlainRender -benchtime 20x ./reconcile/source/
func BenchmarkPlainRender(b *testing.B) {
	for _, n := range []int{90, 900, 3000} {
		var all strings.Builder
		for i := range n {
			fmt.Fprintf(&all, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c%d\ndata:\n  k: v\n", i)
		}
		dir := b.TempDir()
		sha := newTestRepo(b, dir).commit(map[string]string{"app/all.yaml": all.String()})
		exe, _ := os.Executable()
		for _, c := range []struct {
			name string
			cfg  Config
		}{
			{fmt.Sprintf("objects=%d/in-process", n), Config{URL: dir, Path: "app", Renderer: inProcess}},
			{fmt.Sprintf("objects=%d/render-binary", n), Config{URL: dir, Path: "app", Worker: &Worker{Path: exe}}},
		} {
			s := mustNew(b, c.cfg)
			b.Run(c.name, func(b *testing.B) {
				for b.Loop() {
					ms, err := s.Render(context.Background(), sha)
					if err != nil || len(ms) != n {
						b.Fatalf("Render = %d objects, %v", len(ms), err)
					}
				}
			})
		}
	}
}
