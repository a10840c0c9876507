package reconcile_test

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"recond.dev/recond/reconcile"
	"recond.dev/recond/reconcile/cluster"
	"recond.dev/recond/reconcile/source"
	"recond.dev/recond/reconcile/source/renderer"
	"recond.dev/recond/tracing"
)

// countingSource counts the renders of the Source it wraps.
type countingSource struct {
	reconcile.Source
	renders atomic.Int32
}

func (s *countingSource) Render(ctx context.Context, sha string) ([]source.Manifest, error) {
	s.renders.Add(1)
	return s.Source.Render(ctx, sha)
}

// A revision is rendered once: later ticks at the same revision reuse the
// render; a new commit renders again, and so does a revision whose render
// failed, at every tick, until a commit fixes it.
func TestRenderOncePerRevision(t *testing.T) {
	h := newHarness(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	src, err := source.New(source.Config{Renderer: renderer.InProcess{}, URL: h.url, Path: h.cfg.Path, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	counting := &countingSource{Source: src}
	kube, err := cluster.New(h.rest, h.ns)
	if err != nil {
		t.Fatal(err)
	}
	h.rec = reconcile.New(h.cfg, counting, kube, slog.New(slog.NewTextHandler(testWriter{t}, nil)),
		tracing.NewObserver(tp, h.ns, "recond"))

	steps := []struct {
		name    string
		commit  map[string]string // nil: no new commit
		outcome reconcile.Outcome
		renders int32 // in total so far
		cached  bool  // the read span's recond.render.cached
	}{
		{"first commit", app(), reconcile.OutcomeApplied, 1, false},
		{"same revision", nil, reconcile.OutcomeConverged, 1, true},
		{"same revision again", nil, reconcile.OutcomeConverged, 1, true},
		{"new commit", map[string]string{"configmap.yaml": strings.Replace(configMapYAML, "hello", "again", 1)}, reconcile.OutcomeApplied, 2, false},
		{"after the new commit", nil, reconcile.OutcomeConverged, 2, true},
		{"broken commit", map[string]string{"broken.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: [name: x\n"}, reconcile.OutcomeFailed, 3, false},
		{"broken revision is not cached", nil, reconcile.OutcomeFailed, 4, false},
		{"fixed", map[string]string{"broken.yaml": ""}, reconcile.OutcomeConverged, 5, false},
		{"after the fix", nil, reconcile.OutcomeConverged, 5, true},
	}
	for _, s := range steps {
		if s.commit != nil {
			h.repo.Commit(s.name, s.commit)
		}
		rec.Reset()
		r := h.tick()
		if r.Outcome != s.outcome {
			t.Fatalf("%s: outcome %s, want %s (failure %v)", s.name, r.Outcome, s.outcome, r.Failure())
		}
		if got := counting.renders.Load(); got != s.renders {
			t.Errorf("%s: %d renders in total, want %d", s.name, got, s.renders)
		}
		if got, want := readSpanCached(t, rec), s.cached; got != want {
			t.Errorf("%s: read span recond.render.cached = %v, want %v", s.name, got, want)
		}
		if s.outcome != reconcile.OutcomeFailed && r.Counts.Desired != 3 {
			t.Errorf("%s: %d desired objects, want 3", s.name, r.Counts.Desired)
		}
	}
	if g := h.get(gvrConfigMap, "web-config").GetAnnotations()["recond.dev/revision"]; g == "" {
		t.Error("no revision annotation")
	}
}

// readSpanCached returns the read phase span's recond.render.cached.
func readSpanCached(t *testing.T, rec *tracetest.SpanRecorder) bool {
	t.Helper()
	var names []string
	for _, s := range rec.Ended() {
		names = append(names, s.Name())
		if s.Name() != "recond.read" {
			continue
		}
		for _, a := range s.Attributes() {
			if a.Key == "recond.render.cached" {
				return a.Value.AsBool()
			}
		}
		t.Fatalf("read span without recond.render.cached: %v", s.Attributes())
	}
	t.Fatal(cmp.Diff([]string{"recond.read"}, names))
	return false
}
