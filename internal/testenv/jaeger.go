package testenv

import (
	"encoding/json"
	"fmt"
	"net/http"
	neturl "net/url"
	"os"
	"path/filepath"
	"testing"

	"recond.dev/recond/internal/testenv/tools"
)

// Jaeger is a running Jaeger v2 with in-memory storage, every endpoint on
// 127.0.0.1.
type Jaeger struct {
	// OTLPHTTP is the OTLP/HTTP endpoint (http://127.0.0.1:port).
	OTLPHTTP string
	// OTLPGRPC is the OTLP/gRPC endpoint (http://127.0.0.1:port).
	OTLPGRPC string
	// Query is the query service's base URL (/api/traces, /api/services).
	Query string
}

// StartJaeger starts the Jaeger binary named by $JAEGER_BIN (the Makefile
// builds it; tools.Jaeger) and stops it when the test ends.
func StartJaeger(t testing.TB) *Jaeger {
	t.Helper()
	bin := tools.Find(t, tools.Jaeger)
	ports := tools.FreePorts(t, 4)
	j := &Jaeger{
		OTLPGRPC: fmt.Sprintf("http://127.0.0.1:%d", ports[0]),
		OTLPHTTP: fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
		Query:    fmt.Sprintf("http://127.0.0.1:%d", ports[2]),
	}
	// The default configuration binds the query ports on every interface;
	// this one binds everything to loopback.
	cfg := fmt.Sprintf(`service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_storage:
    backends:
      mem:
        memory:
          max_traces: 100000
  jaeger_query:
    storage:
      traces: mem
    http:
      endpoint: 127.0.0.1:%d
    grpc:
      endpoint: 127.0.0.1:%d
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:%d
      http:
        endpoint: 127.0.0.1:%d
processors:
  batch:
    timeout: 50ms
exporters:
  jaeger_storage_exporter:
    trace_storage: mem
`, ports[2], ports[3], ports[0], ports[1])
	path := filepath.Join(t.TempDir(), "jaeger.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	tools.Start(t, bin, []string{"--config", "file:" + path}, func() error {
		var services struct{ Data []string }
		return getJSON(j.Query+"/api/services", &services)
	})
	return j
}

func getJSON(url string, v any) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// Trace is a trace as Jaeger's query API returns it.
type Trace struct {
	TraceID   string `json:"traceID"`
	Spans     []Span `json:"spans"`
	Processes map[string]struct {
		ServiceName string `json:"serviceName"`
		Tags        []Tag  `json:"tags"`
	} `json:"processes"`
}

// Tag is a span or process attribute.
type Tag struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

// Resource returns the trace's (first) process: service name and tags.
func (t Trace) Resource() (string, map[string]string) {
	for _, p := range t.Processes {
		tags := map[string]string{}
		for _, tg := range p.Tags {
			tags[tg.Key] = fmt.Sprint(tg.Value)
		}
		return p.ServiceName, tags
	}
	return "", nil
}

// Span is one span of a Trace.
type Span struct {
	TraceID       string `json:"traceID"`
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"` // CHILD_OF for the parent, FOLLOWS_FROM for a link
		TraceID string `json:"traceID"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	StartTime int64 `json:"startTime"` // µs
	Duration  int64 `json:"duration"`  // µs
	Tags      []Tag `json:"tags"`
}

// Tag returns a span tag's value as text, and whether it is set.
func (s Span) Tag(key string) (string, bool) {
	for _, t := range s.Tags {
		if t.Key == key {
			return fmt.Sprint(t.Value), true
		}
	}
	return "", false
}

// Parent returns the span's parent span id ("" for a root).
func (s Span) Parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

// Traces returns the traces of service (with optional tags, JSON-encoded
// into the query) from the query API.
func (j *Jaeger) Traces(service string, tags map[string]string) ([]Trace, error) {
	url := fmt.Sprintf("%s/api/traces?service=%s&limit=1000&lookback=1h", j.Query, service)
	if len(tags) > 0 {
		b, _ := json.Marshal(tags)
		url += "&tags=" + neturl.QueryEscape(string(b))
	}
	var out struct{ Data []Trace }
	if err := getJSON(url, &out); err != nil {
		return nil, err
	}
	return out.Data, nil
}

// Trace returns one trace by id.
func (j *Jaeger) Trace(id string) (*Trace, error) {
	var out struct{ Data []Trace }
	if err := getJSON(j.Query+"/api/traces/"+id, &out); err != nil {
		return nil, err
	}
	if len(out.Data) != 1 {
		return nil, fmt.Errorf("trace %s: %d results", id, len(out.Data))
	}
	return &out.Data[0], nil
}
