package tracing

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"recond.dev/recond/reconcile"
)

func TestNewFromEnvironment(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		enabled bool
		logs    string
		err     string
	}{
		{"no endpoint", nil, false, "tracing off: no OTEL_EXPORTER_OTLP_ENDPOINT", ""},
		{"sdk disabled", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_SDK_DISABLED": "true"}, false, "OTEL_SDK_DISABLED", ""},
		{"exporter none", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_TRACES_EXPORTER": "none"}, false, "OTEL_TRACES_EXPORTER=none", ""},
		{"http", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://user:pw@127.0.0.1:1"}, true, `"protocol":"http/protobuf"`, ""},
		{"grpc traces endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, true, `"protocol":"grpc"`, ""},
		{"bad protocol", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, false, "", "supports grpc and http/protobuf"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL",
				"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER"} {
				t.Setenv(k, "")
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var buf bytes.Buffer
			p, err := New(context.Background(), Config{ServiceVersion: "v1"}, slog.New(slog.NewJSONHandler(&buf, nil)))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer p.Shutdown(context.Background())
			if p.Enabled != tc.enabled || !strings.Contains(buf.String(), tc.logs) {
				t.Errorf("enabled %v, log %q; want %v and %q", p.Enabled, buf.String(), tc.enabled, tc.logs)
			}
			// Tracing off is the no-op provider: no SDK provider, no exporter.
			if _, isNoop := p.TracerProvider.(noop.TracerProvider); isNoop == tc.enabled {
				t.Errorf("TracerProvider %T with enabled %v: off must be the no-op provider, on the SDK's", p.TracerProvider, tc.enabled)
			}
			if strings.Contains(buf.String(), "pw@") {
				t.Errorf("endpoint credentials logged: %s", buf.String())
			}
		})
	}
}

func TestObserverSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	o := NewObserver(tp, "team-a", "recond")

	// A tick whose observe phase failed: read and observe spans, no diff.
	r := &reconcile.Result{Revision: "abc", Outcome: reconcile.OutcomeFailed, Counts: reconcile.Counts{Desired: 2}}
	ctx := o.TickStart(context.Background())
	for _, p := range []reconcile.Phase{reconcile.PhaseRead, reconcile.PhaseObserve} {
		pctx := o.PhaseStart(ctx, p)
		pr := reconcile.PhaseResult{Phase: p, Duration: time.Millisecond}
		if p == reconcile.PhaseObserve {
			pr.Err = &reconcile.PhaseError{Phase: p, Reason: reconcile.ReasonForbidden, Err: errors.New("list deployments: forbidden")}
		}
		r.Phases = append(r.Phases, pr)
		o.PhaseEnd(pctx, pr, r)
	}
	o.TickEnd(ctx, r)

	spans := rec.Ended()
	var names []string
	for _, s := range spans {
		names = append(names, s.Name())
	}
	if got := strings.Join(names, ","); got != "recond.read,recond.observe,recond.tick" {
		t.Fatalf("spans %s", got)
	}
	root, read, observe := spans[2], spans[0], spans[1]
	if read.Parent().SpanID() != root.SpanContext().SpanID() || observe.Parent().SpanID() != root.SpanContext().SpanID() {
		t.Error("phase spans are not children of recond.tick")
	}
	if root.Parent().IsValid() {
		t.Error("recond.tick is not a root span")
	}
	attrs := map[attribute.Key]string{}
	for _, a := range root.Attributes() {
		attrs[a.Key] = a.Value.Emit()
	}
	for k, want := range map[attribute.Key]string{
		"recond.revision": "abc", "recond.outcome": "failed", "recond.namespace": "team-a", "recond.instance": "recond",
		"recond.objects.desired": "2", "recond.failure.reason": "forbidden", "recond.failure.phase": "observe",
	} {
		if attrs[k] != want {
			t.Errorf("root %s = %q, want %q", k, attrs[k], want)
		}
	}
	if observe.Status().Code != codes.Error || read.Status().Code != codes.Unset {
		t.Errorf("status: observe %v, read %v", observe.Status(), read.Status())
	}
	if len(observe.Events()) != 1 || observe.Events()[0].Name != "exception" {
		t.Errorf("observe events %v, want the recorded error", observe.Events())
	}
}

func TestLogHandlerAddsTraceID(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("t").Start(context.Background(), "s")
	defer span.End()
	var buf bytes.Buffer
	log := NewLogger(slog.NewJSONHandler(&buf, nil)).With("k", "v")
	log.InfoContext(ctx, "in a span")
	log.InfoContext(context.Background(), "outside")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	var in, out map[string]any
	_ = json.Unmarshal([]byte(lines[0]), &in)
	_ = json.Unmarshal([]byte(lines[1]), &out)
	if in["trace_id"] != span.SpanContext().TraceID().String() || in["span_id"] != span.SpanContext().SpanID().String() || in["k"] != "v" {
		t.Errorf("line in a span: %v", in)
	}
	if _, ok := out["trace_id"]; ok {
		t.Errorf("line outside a span has a trace id: %v", out)
	}
}
