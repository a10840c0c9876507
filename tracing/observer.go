package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"recond.dev/recond/reconcile"
)

// ScopeName is the instrumentation scope of recond's spans.
const ScopeName = "recond.dev/recond"

// Observer turns ticks and phases into spans. It implements
// reconcile.Observer.
type Observer struct {
	tracer              trace.Tracer
	namespace, instance string
}

// NewObserver returns an Observer that starts spans with tp.
func NewObserver(tp trace.TracerProvider, namespace, instance string) *Observer {
	return &Observer{tracer: tp.Tracer(ScopeName), namespace: namespace, instance: instance}
}

// TickStart starts the root span recond.tick, a new trace per tick.
// A tick asked for by requests (POST /api/v1/sync, a webhook) links to
// their spans, so that a trace of the request leads to the tick it caused.
func (o *Observer) TickStart(ctx context.Context) context.Context {
	var links []trace.Link
	for _, sc := range reconcile.Links(ctx) {
		links = append(links, trace.Link{SpanContext: sc})
	}
	ctx, _ = o.tracer.Start(ctx, "recond.tick", trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindInternal), trace.WithLinks(links...),
		trace.WithAttributes(attribute.String("recond.namespace", o.namespace), attribute.String("recond.instance", o.instance)))
	return ctx
}

// PhaseStart starts recond.<phase> under the tick.
func (o *Observer) PhaseStart(ctx context.Context, p reconcile.Phase) context.Context {
	ctx, _ = o.tracer.Start(ctx, "recond."+string(p))
	return ctx
}

// PhaseEnd ends the phase span, marking a failed phase as an error with its
// reason.
func (o *Observer) PhaseEnd(ctx context.Context, pr reconcile.PhaseResult, _ *reconcile.Result) {
	span := trace.SpanFromContext(ctx)
	if pr.Err != nil {
		markFailed(span, pr.Err)
	}
	span.End()
}

// TickEnd sets the tick's revision, outcome and counts on the root span and
// ends it; the outcome makes traces searchable by result.
func (o *Observer) TickEnd(ctx context.Context, r *reconcile.Result) {
	span := trace.SpanFromContext(ctx)
	span.SetAttributes(
		attribute.Int64("recond.tick.id", int64(r.ID)),
		attribute.String("recond.trigger", string(r.Trigger)),
		attribute.Int("recond.heals.count", len(r.Heals)),
		attribute.String("recond.revision", r.Revision),
		attribute.String("recond.outcome", string(r.Outcome)),
		attribute.Int("recond.objects.desired", r.Counts.Desired),
		attribute.Int("recond.objects.drifted", r.Counts.Drifted),
		attribute.Int("recond.objects.created", r.Counts.Created),
		attribute.Int("recond.objects.updated", r.Counts.Updated),
		attribute.Int("recond.objects.pruned", r.Counts.Pruned),
		attribute.Int("recond.objects.terminating", r.Counts.Terminating),
		attribute.Int("recond.objects.server_equivalent", r.Counts.Equivalent),
	)
	if h := r.Health; h != nil {
		bad := h.Unhealthy()
		span.SetAttributes(attribute.String("recond.health", string(h.Status)),
			attribute.Int("recond.objects.unhealthy", len(bad)))
		if len(bad) > 0 {
			const most = 50
			names := reconcile.UnhealthyList(bad[:min(len(bad), most)])
			span.SetAttributes(attribute.StringSlice("recond.unhealthy", names))
		}
	}
	if r.DryRun {
		span.SetAttributes(attribute.Bool("recond.dry_run", true))
	}
	if c := r.Observe; c != nil {
		span.SetAttributes(
			attribute.Int64("recond.observe.api_calls", c.Calls),
			attribute.Float64("recond.observe.sync_wait_ms", float64(c.SyncWait.Microseconds())/1000),
			attribute.Float64("recond.observe.cache_age_ms", float64(c.CacheAge.Microseconds())/1000),
		)
	}
	if f := r.Failure(); f != nil {
		span.SetAttributes(attribute.String("recond.failure.phase", string(f.Phase)))
		markFailed(span, f)
	}
	span.End()
}

func markFailed(span trace.Span, e *reconcile.PhaseError) {
	span.SetAttributes(attribute.String("recond.failure.reason", string(e.Reason)))
	span.RecordError(e.Err)
	span.SetStatus(codes.Error, e.Err.Error())
}
