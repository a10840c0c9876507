package renderer_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/internal/testenv/tools"
	"recond.dev/recond/reconcile/source/chartspec"
	"recond.dev/recond/reconcile/source/fetch"
	"recond.dev/recond/reconcile/source/git"
	"recond.dev/recond/reconcile/source/manifest"
	"recond.dev/recond/reconcile/source/renderer"
	"recond.dev/recond/reconcile/source/worker"
)

// corpusDir holds the public charts the renderer is compared on (the
// bench package's TestCharts renders the same ones).
const corpusDir = "../testdata/charts"

// corpusValues are the values files the corpus gives a chart, paths from
// corpusDir (as bench/charts_test.go gives them).
var corpusValues = map[string][]string{
	"podinfo": {"podinfo/values-prod.yaml", "podinfo.values.yaml"},
	"mysql":   {"mysql.values.yaml"},
}

// corpusJobs commits the corpus to a repository and returns a chart job
// of it per chart, by name.
func corpusJobs(tb testing.TB) map[string]worker.Job {
	tb.Helper()
	repo := testenv.NewRepo(tb)
	sha := repo.Commit("corpus", testenv.ReadFiles(tb, corpusDir))
	entries, err := os.ReadDir(corpusDir)
	if err != nil {
		tb.Fatal(err)
	}
	jobs := map[string]worker.Job{}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		name := e.Name()
		jobs[name] = worker.Job{
			Tree: fetch.Location{Source: git.Name, Path: repo.Dir, Local: true}, Rev: sha,
			Label: "helm template " + name, Dir: name, Chart: true,
			Helm: &chartspec.Request{Release: "bench", Namespace: "bench", Values: corpusValues[name],
				KubeVersion: "v1.37.0", Now: time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC), Seed: []byte("bench-seed")},
		}
	}
	return jobs
}

// renderBinary is the render binary the worker benchmarks run:
// $RECOND_RENDER_BIN, else cmd/recond-render built as `make build`
// builds it.
func renderBinary(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv("RECOND_RENDER_BIN"); p != "" {
		return p
	}
	out := filepath.Join(tb.TempDir(), "recond-render")
	cmd := exec.Command("go", "build", "-tags", "grpcnotrace", "-trimpath", "-ldflags", "-s -w", "-o", out, "../../../cmd/recond-render")
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("build recond-render: %v\n%s", err, b)
	}
	return out
}

// BenchmarkCorpus renders each chart of the corpus in the calling process
// (InProcess) and in a render binary process (Worker), as recond does.
//
//	go test -run '^$' -bench Corpus -benchtime 10x ./reconcile/source/renderer/
func BenchmarkCorpus(b *testing.B) {
	jobs := corpusJobs(b)
	w := &worker.Worker{Path: renderBinary(b)}
	inProcess := renderer.InProcess{}
	type renderer interface {
		Render(context.Context, worker.Job) (*worker.Result, error)
	}
	runs := []struct {
		name string
		r    renderer
	}{{"InProcess", inProcess}, {"Worker", w}}
	if h := helmTemplate(b); h != nil {
		runs = append(runs, struct {
			name string
			r    renderer
		}{"Helm", h})
	}
	for _, r := range runs {
		for _, name := range slices.Sorted(maps.Keys(jobs)) {
			b.Run(r.name+"/"+name, func(b *testing.B) {
				var before, after unix.Rusage
				_ = unix.Getrusage(unix.RUSAGE_CHILDREN, &before)
				for b.Loop() {
					res, err := r.r.Render(context.Background(), jobs[name])
					if err != nil {
						b.Fatal(err)
					}
					if len(res.Manifests) == 0 {
						b.Fatal("no objects")
					}
				}
				// The CPU time of the processes it started (recond-render's,
				// helm's), which a loaded machine does not inflate.
				_ = unix.Getrusage(unix.RUSAGE_CHILDREN, &after)
				cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
				b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "child-cpu-ms/op")
			})
		}
	}
}

// helmTemplate runs `helm template` as bench/charts_test.go does (nil
// when there is no helm binary: $HELM_BIN, or `make fixture-tools`).
func helmTemplate(tb testing.TB) *helmCLI {
	p, err := tools.Lookup(tools.Helm)
	if err != nil {
		tb.Logf("no helm template to compare with: %v", err)
		return nil
	}
	return &helmCLI{path: p}
}

type helmCLI struct{ path string }

// Render runs `helm template` on the chart of job, from the corpus on disk.
func (h *helmCLI) Render(ctx context.Context, job worker.Job) (*worker.Result, error) {
	args := []string{"template", job.Helm.Release, filepath.Join(corpusDir, job.Dir), "-n", job.Helm.Namespace, "--kube-version", job.Helm.KubeVersion}
	for _, v := range job.Helm.Values {
		args = append(args, "-f", filepath.Join(corpusDir, v))
	}
	cmd := exec.CommandContext(ctx, h.path, args...)
	cmd.Env = append(os.Environ(), "TZ=UTC", "KUBECONFIG=/dev/null")
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("helm template %s: %w", job.Dir, err)
	}
	return &worker.Result{Manifests: make([]manifest.Manifest, bytes.Count(out, []byte("\n---")))}, nil
}
