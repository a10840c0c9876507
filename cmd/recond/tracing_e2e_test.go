package main

import (
	"cmp"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"recond.dev/recond/internal/testenv"
)

// deployYAML is the Deployment the tests apply and roll out.
const deployYAML = testenv.DeploymentYAML

// traceEnv points recond's exporter at Jaeger under a service name of the
// test's own, so that its traces are told apart.
func traceEnv(t *testing.T, j *testenv.Jaeger, protocol string) string {
	t.Helper()
	service := "recond-" + strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	endpoint := j.OTLPHTTP
	if protocol == "grpc" {
		endpoint = j.OTLPGRPC
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
	t.Setenv("OTEL_SERVICE_NAME", service)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	t.Setenv("POD_NAME", "recond-abc")
	return service
}

// waitTraces polls Jaeger until want traces of service match tags.
func waitTraces(t *testing.T, j *testenv.Jaeger, service string, tags map[string]string, want int) []testenv.Trace {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ts, err := j.Traces(service, tags)
		if err == nil && len(ts) >= want && complete(ts) {
			return ts
		}
		if time.Now().After(deadline) {
			t.Fatalf("Jaeger has %d traces of %s with %v (err %v), want %d", len(ts), service, tags, err, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// complete reports whether every trace has its root and its five phases or
// its failed phase (spans arrive in batches, the root last or first).
func complete(ts []testenv.Trace) bool {
	for _, tr := range ts {
		if !hasRoot(tr) {
			return false
		}
		phases := 0
		failed := false
		for _, s := range tr.Spans {
			switch s.OperationName {
			case "recond.read", "recond.observe", "recond.diff", "recond.apply", "recond.health":
				phases++
				if _, ok := s.Tag("recond.failure.reason"); ok {
					failed = true
				}
			}
		}
		if phases < 5 && !failed {
			return false
		}
	}
	return true
}

// tree indexes a trace's spans.
type tree struct {
	root     testenv.Span
	byID     map[string]testenv.Span
	children map[string][]testenv.Span
}

func newTree(t *testing.T, tr testenv.Trace) *tree {
	t.Helper()
	tt := &tree{byID: map[string]testenv.Span{}, children: map[string][]testenv.Span{}}
	for _, s := range tr.Spans {
		tt.byID[s.SpanID] = s
		if p := s.Parent(); p == "" {
			tt.root = s
		} else {
			tt.children[p] = append(tt.children[p], s)
		}
	}
	if tt.root.OperationName != "recond.tick" {
		t.Fatalf("root span %q, want recond.tick", tt.root.OperationName)
	}
	return tt
}

func (tt *tree) child(t *testing.T, parent testenv.Span, name string) testenv.Span {
	t.Helper()
	var found []testenv.Span
	for _, c := range tt.children[parent.SpanID] {
		if c.OperationName == name {
			found = append(found, c)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d %s spans under %s, want 1", len(found), name, parent.OperationName)
	}
	return found[0]
}

// kids returns a span's children in start order.
func (tt *tree) kids(parent testenv.Span) []testenv.Span {
	kids := slices.Clone(tt.children[parent.SpanID])
	slices.SortFunc(kids, func(a, b testenv.Span) int { return cmp.Compare(a.StartTime, b.StartTime) })
	return kids
}

func (tt *tree) names(parent testenv.Span) []string {
	var out []string
	for _, c := range tt.kids(parent) {
		out = append(out, c.OperationName)
	}
	return out
}

func tag(t *testing.T, s testenv.Span, key, want string) {
	t.Helper()
	if got, ok := s.Tag(key); !ok || got != want {
		t.Errorf("%s: %s = %q (set %v), want %q", s.OperationName, key, got, ok, want)
	}
}

func TestTracesInJaeger(t *testing.T) {
	cp.Require(t)
	j := testenv.StartJaeger(t)
	service := traceEnv(t, j, "http/protobuf")
	repo := testenv.NewRepo(t)
	sha := repo.Commit("app", map[string]string{"cm.yaml": cmYAML, "deploy.yaml": deployYAML})
	args := clusterArgs(t, repo.URL())
	ns := args[3]

	if code, _, _ := recond(t, append([]string{"sync"}, args...)...); code != 0 {
		t.Fatalf("first sync: exit %d", code)
	}
	if code, _, _ := recond(t, append([]string{"sync"}, args...)...); code != 0 {
		t.Fatalf("second sync: exit %d", code)
	}

	t.Run("applied tick", func(t *testing.T) {
		ts := waitTraces(t, j, service, map[string]string{"recond.outcome": "applied"}, 1)
		tt := newTree(t, ts[0])
		tag(t, tt.root, "recond.revision", sha)
		tag(t, tt.root, "recond.namespace", ns)
		tag(t, tt.root, "recond.instance", "recond")
		tag(t, tt.root, "recond.objects.desired", "2")
		tag(t, tt.root, "recond.objects.created", "2")
		tag(t, tt.root, "recond.objects.pruned", "0")
		// No controller runs: the Deployment recond created is in progress.
		tag(t, tt.root, "recond.health", "progressing")
		tag(t, tt.root, "recond.objects.unhealthy", "1")
		tag(t, tt.child(t, tt.root, "recond.health"), "recond.objects.assessed", "2")
		svc, res := ts[0].Resource()
		if svc != service || res["service.version"] != "dev" || res["k8s.namespace.name"] != ns || res["k8s.pod.name"] != "recond-abc" {
			t.Errorf("resource: service %q, tags %v", svc, res)
		}
		if got := strings.Join(tt.names(tt.root), ","); got != "recond.read,recond.observe,recond.diff,recond.apply,recond.health" {
			t.Errorf("phases under the tick: %s", got)
		}
		read := tt.child(t, tt.root, "recond.read")
		tt.child(t, read, "recond.git.fetch")
		tag(t, tt.child(t, read, "recond.render"), "recond.objects.count", "2")

		observe := tt.child(t, tt.root, "recond.observe")
		lists, gets := 0, 0
		for _, c := range tt.children[observe.SpanID] {
			switch c.OperationName {
			case "recond.list":
				lists++
				if _, ok := c.Tag("k8s.kind"); !ok {
					t.Errorf("recond.list without k8s.kind")
				}
				tag(t, c, "recond.objects.count", "0")
			case "recond.get":
				gets++
			}
			// Every API call is a client HTTP span under its LIST/GET.
			http := tt.children[c.SpanID]
			if len(http) == 0 || !strings.HasPrefix(http[0].OperationName, "GET /api") {
				t.Errorf("%s has no HTTP child span: %v", c.OperationName, tt.names(c))
			}
		}
		// ConfigMap and Deployment, owned; then, as both objects are
		// missing, the same kinds unfiltered (they may exist unowned);
		// one GET, the inventory. No GET per object.
		if lists != 4 || gets != 1 {
			t.Errorf("observe made %d LISTs and %d GETs, want 4 and 1: %v", lists, gets, tt.names(observe))
		}
		apply := tt.child(t, tt.root, "recond.apply")
		var written []string
		for _, c := range tt.kids(apply) {
			if c.OperationName == "recond.apply.object" {
				k, _ := c.Tag("k8s.kind")
				n, _ := c.Tag("k8s.name")
				a, _ := c.Tag("recond.action")
				written = append(written, k+"/"+n+":"+a)
			}
		}
		if got := strings.Join(written, ","); got != "ConfigMap/c:create,Deployment/web:create" {
			// Dependency order: the ConfigMap before the Deployment.
			t.Errorf("apply children: %s", got)
		}
	})

	t.Run("converged tick has all five phases", func(t *testing.T) {
		ts := waitTraces(t, j, service, map[string]string{"recond.outcome": "converged"}, 1)
		tt := newTree(t, ts[0])
		if got := strings.Join(tt.names(tt.root), ","); got != "recond.read,recond.observe,recond.diff,recond.apply,recond.health" {
			t.Errorf("phases under a converged tick: %s", got)
		}
		if n := len(tt.children[tt.child(t, tt.root, "recond.apply").SpanID]); n != 0 {
			t.Errorf("a converged apply has %d children, want 0", n)
		}
	})

	t.Run("failed phase over gRPC", func(t *testing.T) {
		service := traceEnv(t, j, "grpc")
		repo.Commit("broken", map[string]string{"broken.yaml": "kind: [\n"})
		if code, _, _ := recond(t, append([]string{"sync"}, args...)...); code != 1 {
			t.Fatalf("sync of a broken commit: exit %d, want 1", code)
		}
		ts := waitTraces(t, j, service, map[string]string{"recond.outcome": "failed"}, 1)
		tt := newTree(t, ts[0])
		if got := strings.Join(tt.names(tt.root), ","); got != "recond.read" {
			t.Errorf("phases under a tick that failed read: %s", got)
		}
		read := tt.child(t, tt.root, "recond.read")
		tag(t, read, "otel.status_code", "ERROR")
		tag(t, read, "recond.failure.reason", "invalid")
		tag(t, tt.root, "recond.failure.reason", "invalid")
		tag(t, tt.root, "recond.failure.phase", "read")
		if d, _ := read.Tag("otel.status_description"); !strings.Contains(d, "broken.yaml") {
			t.Errorf("status description %q does not name the file", d)
		}
		repo.Commit("fixed", map[string]string{"broken.yaml": ""})
	})
}

// A slow API server shows up in Jaeger as a slow HTTP span under
// recond.observe: a proxy in front of the API server delays every LIST.
func TestSlowObserveIsTheAPICall(t *testing.T) {
	cp.Require(t)
	// Far above what load adds to any other request: the LIST's span is
	// the longest because of the delay, not because of the machine.
	const delay = 1500 * time.Millisecond
	j := testenv.StartJaeger(t)
	service := traceEnv(t, j, "http/protobuf")

	tr, err := rest.TransportFor(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			u := *r.In.URL
			u.Scheme, u.Host = "https", strings.TrimPrefix(strings.TrimSuffix(cp.Config.Host, "/"), "https://")
			r.Out.URL = &u
			r.Out.Host = u.Host
		},
		Transport: tr,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Query().Has("labelSelector") {
			time.Sleep(delay)
		}
		proxy.ServeHTTP(w, r)
	}))
	defer srv.Close()
	kubeconfig := t.TempDir() + "/slow"
	if err := os.WriteFile(kubeconfig, fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters: [{name: slow, cluster: {server: %q}}]
users: [{name: u, user: {}}]
contexts: [{name: slow, context: {cluster: slow, user: u}}]
current-context: slow
`, srv.URL), 0o600); err != nil {
		t.Fatal(err)
	}
	repo := testenv.NewRepo(t)
	repo.Commit("cm", map[string]string{"cm.yaml": cmYAML})
	args := clusterArgs(t, repo.URL())
	args[5] = kubeconfig // --kubeconfig
	if code, _, _ := recond(t, append([]string{"sync"}, args...)...); code != 0 {
		t.Fatalf("sync: exit %d", code)
	}
	ts := waitTraces(t, j, service, map[string]string{"recond.outcome": "applied"}, 1)
	tt := newTree(t, ts[0])
	observe := tt.child(t, tt.root, "recond.observe")
	// Drill down as a person would in Jaeger: from observe, always into the
	// longest child, until a leaf. It must be the LIST's HTTP request.
	slowest := observe
	for len(tt.children[slowest.SpanID]) > 0 {
		kids := tt.children[slowest.SpanID]
		next := kids[0]
		for _, c := range kids[1:] {
			if c.Duration > next.Duration {
				next = c
			}
		}
		slowest = next
	}
	parent := tt.byID[slowest.Parent()]
	if !strings.HasPrefix(slowest.OperationName, "GET /api/v1/namespaces/") || parent.OperationName != "recond.list" {
		t.Fatalf("slowest span under observe is %q (under %q), want the LIST's HTTP GET", slowest.OperationName, parent.OperationName)
	}
	if time.Duration(slowest.Duration)*time.Microsecond < delay {
		t.Errorf("slowest HTTP span took %dµs, less than the %s delay", slowest.Duration, delay)
	}
	if code, _ := slowest.Tag("http.response.status_code"); code != "200" {
		t.Logf("HTTP status tag: %q", code)
	}
}

// An exemplar of recond_phase_duration_seconds names a trace Jaeger has.
func TestExemplarLeadsToJaegerTrace(t *testing.T) {
	cp.Require(t)
	j := testenv.StartJaeger(t)
	traceEnv(t, j, "http/protobuf")
	repo := testenv.NewRepo(t)
	repo.Commit("cm", map[string]string{"cm.yaml": cmYAML})
	r := startRun(t, "1h", true, clusterArgs(t, repo.URL())...)
	req, _ := http.NewRequest(http.MethodGet, "http://"+r.addr+"/metrics", nil)
	req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	r.stop() // flushes the traces
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/openmetrics-text") {
		t.Fatalf("content type %q, want OpenMetrics", ct)
	}
	m := regexp.MustCompile(`(?m)^recond_phase_duration_seconds_bucket\{[^}]*phase="observe"[^}]*\} \d+ # \{trace_id="([0-9a-f]{32})"\}`).FindSubmatch(body)
	if m == nil {
		t.Fatalf("no trace_id exemplar on the observe phase histogram:\n%s", grep(string(body), "recond_phase_duration_seconds_bucket"))
	}
	id := string(m[1])
	if !strings.Contains(r.log.String(), `"trace_id":"`+id+`"`) {
		t.Errorf("the tick's log lines do not carry trace_id %s", id)
	}
	// Spans arrive in batches: wait until the root span is stored too.
	deadline := time.Now().Add(30 * time.Second)
	for {
		tr, err := j.Trace(id)
		if err == nil && hasRoot(*tr) {
			newTree(t, *tr)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Jaeger has no complete trace %s: %v", id, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func hasRoot(tr testenv.Trace) bool {
	for _, s := range tr.Spans {
		if s.Parent() == "" && s.OperationName == "recond.tick" {
			return true
		}
	}
	return false
}

func grep(s, prefix string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// A tick asked for with POST /api/v1/sync links to the request's trace: the
// caller's W3C traceparent is honoured (the request's server span is a child
// of it), and the tick's root span, a trace of its own, links to that span.
func TestSyncRequestLinksToTheTick(t *testing.T) {
	cp.Require(t)
	j := testenv.StartJaeger(t)
	service := traceEnv(t, j, "http/protobuf")
	repo := testenv.NewRepo(t)
	repo.Commit("cm", map[string]string{"cm.yaml": cmYAML})
	token := writeFile(t, "token", "trace-token")
	r := startRun(t, "1h", true, append([]string{"--sync-token-file", token, "--leader-elect=false"}, clusterArgs(t, repo.URL())...)...)

	const caller = "4bf92f3577b34da6a3ce929d0e0e4736"
	req, _ := http.NewRequest(http.MethodPost, "http://"+r.addr+"/api/v1/sync", nil)
	req.Header.Set("Authorization", "Bearer trace-token")
	req.Header.Set("traceparent", "00-"+caller+"-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /api/v1/sync: %s", resp.Status)
	}
	ts := waitTraces(t, j, service, map[string]string{"recond.trigger": "manual"}, 1)
	tt := newTree(t, ts[0])
	if tt.root.TraceID == caller {
		t.Fatal("the tick joined the caller's trace; it should be a trace of its own that links to it")
	}
	linked := false
	for _, ref := range tt.root.References {
		linked = linked || ref.RefType == "FOLLOWS_FROM" && ref.TraceID == caller
	}
	if !linked {
		t.Errorf("the manual tick's root span has no link to the caller's trace %s: %+v", caller, tt.root.References)
	}
	// The request's own span, in the caller's trace.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		tr, err := j.Trace(caller)
		if err == nil && len(tr.Spans) > 0 && tr.Spans[0].OperationName == "POST /api/v1/sync" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no span of the request in the caller's trace: %+v %v", tr, err)
		}
	}
}
