package helm

import (
	"context"
	"os"
	"testing"
	"time"

	"recond.dev/recond/reconcile/source/chartspec"
	"recond.dev/recond/reconcile/source/render"
	"recond.dev/recond/reconcile/source/tree"
)

// corpusDir holds the public charts recond's renders are compared on.
const corpusDir = "../testdata/charts"

// corpusValues are the values files the corpus gives a chart (as
// bench/charts_test.go gives them).
var corpusValues = map[string][]string{
	"podinfo": {"podinfo/values-prod.yaml", "podinfo.values.yaml"},
	"mysql":   {"mysql.values.yaml"},
}

// BenchmarkBuild renders each chart of the corpus with Build, from the
// files on disk: the render alone, without a process, a repository or
// the decoding of its output.
//
//	go test -run '^$' -bench Build -benchtime 10x ./reconcile/source/helm/
func BenchmarkBuild(b *testing.B) {
	root := tree.FSDir(os.DirFS(corpusDir))
	entries, err := os.ReadDir(corpusDir)
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		name := e.Name()
		req := Request{Request: chartspec.Request{Release: "bench", Namespace: "bench", Values: corpusValues[name], KubeVersion: "v1.37.0",
			Now: time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC), Seed: []byte("bench-seed")}}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, err := Build(context.Background(), root, name, render.NewBudget(render.DefaultLimits), req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
