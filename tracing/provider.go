package tracing

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Config is what the resource says about this process.
type Config struct {
	ServiceVersion string // service.version
	Namespace      string // k8s.namespace.name
	PodName        string // k8s.pod.name; "" to omit
}

// Provider is a TracerProvider with the means to flush it.
type Provider struct {
	trace.TracerProvider
	// Enabled is false when no exporter is configured (a no-op provider).
	Enabled  bool
	shutdown func(context.Context) error
}

// Shutdown flushes the spans not yet exported and stops the exporter.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p.shutdown == nil {
		return nil
	}
	return p.shutdown(ctx)
}

// New builds the TracerProvider from the standard environment:
// OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (no
// endpoint: tracing off), OTEL_EXPORTER_OTLP_PROTOCOL /
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL (grpc or http/protobuf, the default),
// OTEL_EXPORTER_OTLP_HEADERS, OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES,
// OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG. OTEL_SDK_DISABLED=true or
// OTEL_TRACES_EXPORTER=none turn it off too. One log line says which.
func New(ctx context.Context, cfg Config, log *slog.Logger) (*Provider, error) {
	endpoint := firstEnv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
	switch {
	case strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true"):
		log.Info("tracing off: OTEL_SDK_DISABLED=true")
		return off(), nil
	case os.Getenv("OTEL_TRACES_EXPORTER") == "none":
		log.Info("tracing off: OTEL_TRACES_EXPORTER=none")
		return off(), nil
	case endpoint == "":
		log.Info("tracing off: no OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set")
		return off(), nil
	}
	protocol := firstEnv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
	if protocol == "" {
		protocol = "http/protobuf"
	}
	var (
		exp sdktrace.SpanExporter
		err error
	)
	// The exporters read endpoint, headers, TLS and timeout from the
	// environment themselves.
	switch protocol {
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	case "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%q: recond supports grpc and http/protobuf", protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("otlp exporter: %w", err)
	}
	attrs := []attribute.KeyValue{
		attribute.String("service.name", "recond"),
		attribute.String("service.version", cfg.ServiceVersion),
		attribute.String("k8s.namespace.name", cfg.Namespace),
	}
	if cfg.PodName != "" {
		attrs = append(attrs, attribute.String("k8s.pod.name", cfg.PodName))
	}
	// Later options win: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
	// override the defaults above.
	res, err := resource.New(ctx, resource.WithAttributes(attrs...), resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	// The SDK reads OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG itself.
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	log.Info("tracing on", "endpoint", redactEndpoint(endpoint), "protocol", protocol)
	return &Provider{TracerProvider: tp, Enabled: true, shutdown: tp.Shutdown}, nil
}

func off() *Provider { return &Provider{TracerProvider: noop.NewTracerProvider()} }

func firstEnv(keys ...string) string {
	for _, k := range keys {
		if v := os.Getenv(k); v != "" {
			return v
		}
	}
	return ""
}

// redactEndpoint drops userinfo from an endpoint URL before it is logged.
func redactEndpoint(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return s
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 && at < strings.IndexAny(rest+"/", "/") {
		rest = rest[at+1:]
	}
	return scheme + "://" + rest
}
