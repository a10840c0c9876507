// Package tracing makes recond's loop visible in any OpenTelemetry backend:
// one trace per tick, root span recond.tick, one child per phase that ran
// (recond.read, recond.observe, recond.diff, recond.apply), and below them
// the spans the phases open themselves (git fetch, render, one per LIST/GET,
// one per object written) and the client-go HTTP requests.
//
// The exporter is configured only through the standard OTEL_* environment
// variables; with no endpoint set, tracing is off and costs nothing. The
// package also wraps a slog.Handler so that every log line written in a
// traced context carries trace_id and span_id.
package tracing
