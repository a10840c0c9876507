package reconcile

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// startSpan opens a child of the span in ctx with the provider that started
// it, so that phases need no tracing package: with tracing off the parent is
// a no-op span and so is the child.
func startSpan(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return trace.SpanFromContext(ctx).TracerProvider().Tracer("recond.dev/recond").
		Start(ctx, name, trace.WithAttributes(attrs...))
}

// endSpan records err (if any) on span and ends it.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

func kindAttr(kind string) attribute.KeyValue { return attribute.String("k8s.kind", kind) }
