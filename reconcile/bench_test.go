package reconcile_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"recond.dev/recond/metrics"
	"recond.dev/recond/reconcile"
	"recond.dev/recond/reconcile/cluster"
	"recond.dev/recond/reconcile/watch"
	"recond.dev/recond/tracing"
)

// BenchmarkTick measures whole ticks against the real API server: the first
// sync of a fresh namespace, and a converged tick (nothing to write), for the
// demo app (3 objects) and for 100 and 900 ConfigMaps (applied 8 at a time).
//
//	make bench   (or: go test -run '^$' -bench Tick -benchmem ./reconcile/)
func BenchmarkTick(b *testing.B) {
	cp.Require(b)
	for _, set := range []struct {
		name        string
		files       map[string]string
		concurrency int
	}{{"app", app(), 0}, {"100-configmaps", configMapFiles(100), 8}, {"900-configmaps", configMapFiles(900), 8}} {
		b.Run(set.name+"/first-sync", func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				h := newHarness(b)
				h.cfg.ApplyConcurrency = set.concurrency
				h.repo.Commit("set", set.files)
				h.reconciler()
				b.StartTimer()
				if r := h.tick(); r.Outcome != reconcile.OutcomeApplied {
					b.Fatalf("outcome %s: %v", r.Outcome, r.Failure())
				}
			}
		})
		for _, mode := range []string{"list", "watch"} {
			b.Run(set.name+"/converged-"+mode, func(b *testing.B) {
				h := newHarness(b)
				h.cfg.ApplyConcurrency = set.concurrency
				if mode == "watch" {
					h.cfg.Live = newCache(b, h)
				}
				h.repo.Commit("set", set.files)
				h.mustTick(reconcile.OutcomeApplied)
				h.mustTick(reconcile.OutcomeConverged)
				var assess time.Duration
				for b.Loop() {
					r := h.tick()
					if r.Outcome != reconcile.OutcomeConverged {
						b.Fatalf("outcome %s: %v", r.Outcome, r.Failure())
					}
					assess += r.PhaseDuration(reconcile.PhaseHealth)
				}
				// What the health phase costs of a converged tick.
				b.ReportMetric(float64(assess.Microseconds())/float64(b.N), "health-µs/op")
			})
		}
	}
}

// BenchmarkObservability measures what metrics, logs and tracing add to a
// converged tick of the demo app: none at all; metrics and logs with tracing
// off (no endpoint: a no-op provider); and all of them with the tracing SDK
// recording every span, including client-go's HTTP requests, into a batch
// exporter that discards them (the cost of the instrumentation, without the
// network).
//
//	go test -run '^$' -bench Observability -benchmem ./reconcile/
func BenchmarkObservability(b *testing.B) {
	cp.Require(b)
	discard := slog.New(slog.NewJSONHandler(io.Discard, nil))
	for _, variant := range []string{"bare", "metrics+logs", "metrics+logs+tracing"} {
		b.Run(variant, func(b *testing.B) {
			h := newHarness(b)
			h.repo.Commit("app", app())
			switch variant {
			case "bare":
				h.observers = []reconcile.Observer{}
			case "metrics+logs":
				m := metrics.New(prometheus.NewRegistry(), metrics.Options{Interval: time.Minute})
				h.observers = []reconcile.Observer{m, reconcile.LogObserver{Log: tracing.NewLogger(discard.Handler())}}
			default:
				tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardExporter{}))
				b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
				cfg := rest.CopyConfig(cp.Config)
				cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
					return otelhttp.NewTransport(rt, otelhttp.WithTracerProvider(tp))
				})
				h.rest = cfg
				m := metrics.New(prometheus.NewRegistry(), metrics.Options{Interval: time.Minute})
				h.observers = []reconcile.Observer{tracing.NewObserver(tp, h.ns, "recond"), m, reconcile.LogObserver{Log: tracing.NewLogger(discard.Handler())}}
			}
			h.mustTick(reconcile.OutcomeApplied)
			for b.Loop() {
				if r := h.tick(); r.Outcome != reconcile.OutcomeConverged {
					b.Fatalf("outcome %s", r.Outcome)
				}
			}
		})
	}
}

type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

// newCache is a watch cache for h's namespace, closed with the test.
func newCache(tb testing.TB, h *harness) *watch.Cache {
	tb.Helper()
	kube, err := cluster.New(h.rest, h.ns)
	if err != nil {
		tb.Fatal(err)
	}
	c, err := watch.New(context.Background(), dynamic.NewForConfigOrDie(h.rest), kube, h.ns, watch.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	return c
}
