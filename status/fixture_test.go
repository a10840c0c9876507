package status

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"recond.dev/recond/reconcile"
	"recond.dev/recond/reconcile/diff"
	"recond.dev/recond/reconcile/health"
)

// t0 is the scripted ticks' clock.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	sha1 = "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b"
	sha2 = "9f8e7d6c5b4a39281706f5e4d3c2b1a098765432"
)

// testInfo is the instance the scripted pages describe.
var testInfo = Info{
	Namespace: "shop", Instance: "recond", Repo: "https://example.com/org/shop.git", Ref: "main", Path: "deploy",
	Observe: "watch", Interval: time.Minute,
	CommitURLTemplate: "https://example.com/org/shop/commit/{revision}",
	TraceURLTemplate:  "http://jaeger:16686/trace/{trace_id}",
}

// phases are five phases that ran, 100 ms in all.
func phases() []reconcile.PhaseResult {
	return []reconcile.PhaseResult{
		{Phase: reconcile.PhaseRead, Duration: 10 * time.Millisecond},
		{Phase: reconcile.PhaseObserve, Duration: 20 * time.Millisecond},
		{Phase: reconcile.PhaseDiff, Duration: 5 * time.Millisecond},
		{Phase: reconcile.PhaseApply, Duration: 60 * time.Millisecond},
		{Phase: reconcile.PhaseHealth, Duration: 5 * time.Millisecond},
	}
}

// converged is tick id, converged at sha1, a minute after the previous.
func converged(id uint64) *reconcile.Result {
	return &reconcile.Result{
		ID: id, Revision: sha1, Start: t0.Add(time.Duration(id) * time.Minute), Duration: 100 * time.Millisecond,
		Phases: phases(), Outcome: reconcile.OutcomeConverged, Trigger: reconcile.TriggerInterval,
		Counts: reconcile.Counts{Desired: 3, Managed: 3},
	}
}

// withObjects gives r a health assessment of n objects.
func withObjects(r *reconcile.Result, n int) *reconcile.Result {
	h := &reconcile.Health{Status: health.Healthy}
	for i := range n {
		st, msg := health.Current, ""
		if i%7 == 3 {
			st, msg = health.InProgress, "Deployment is progressing: 1 of 2 replicas updated"
		}
		h.Objects = append(h.Objects, reconcile.ObjectHealth{
			Ref:    reconcile.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Name: fmt.Sprintf("config-%04d", i)},
			Status: st, Message: msg, Since: t0, Revision: sha1, Changed: t0.Add(-time.Hour),
		})
	}
	r.Health = h
	return r
}

// The Secret value the scripted ticks write, and what must never appear.
const (
	secretValue  = "hunter2-do-not-show"
	secretMaskA  = "<secret sha256:1a2b3c4d>"
	secretMaskB  = "<secret sha256:5e6f7a8b>"
	unmaskedLeak = "plain-leak-value"
)

// secretTick updates a ConfigMap and a Secret and fails in apply with an
// error that quotes the Secret's value (as an API server's may).
func secretTick(id uint64) *reconcile.Result {
	desired := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "db"},
		"stringData": map[string]any{"password": secretValue},
	}}
	quoted := fmt.Errorf("Secret \"db\" is invalid: data[password]: %q: bad", secretValue)
	r := converged(id)
	r.Revision = sha2
	r.Outcome = reconcile.OutcomeFailed
	r.Trigger = reconcile.TriggerWebhook
	r.Phases = phases()[:4]
	r.Phases[3].Err = &reconcile.PhaseError{Phase: reconcile.PhaseApply, Reason: reconcile.ReasonInvalid, Err: quoted}
	r.Counts = reconcile.Counts{Desired: 3, Drifted: 2, Updated: 1, Managed: 3}
	r.Changes = []diff.Change{
		{Kind: "ConfigMap", Name: "app", Action: diff.Update, Fields: []diff.FieldDiff{
			{Path: "data.LOG_LEVEL", Live: "debug", Desired: "info"},
			{Path: "data.removed", Live: "x", Desired: nil},
		}},
		{Kind: "Secret", Name: "db", Action: diff.Update, Desired: desired, Fields: []diff.FieldDiff{
			{Path: "data.password", Live: secretMaskA, Desired: secretMaskB},
			// A value the diff did not mask: the page hides it all the same.
			{Path: "stringData.token", Live: nil, Desired: unmaskedLeak},
			{Path: "data", Live: map[string]any{"a": secretMaskA, "b": unmaskedLeak}, Desired: nil},
		}},
	}
	r.Ops = []reconcile.Operation{
		{Kind: "ConfigMap", Name: "app", Action: diff.Update, Duration: 12 * time.Millisecond, Fields: []string{"data.LOG_LEVEL"}},
		{Kind: "Secret", Name: "db", Action: diff.Update, Duration: 8 * time.Millisecond, Err: quoted},
	}
	return r
}

// failedRead fails in read with an error that names a URL (shown as given:
// the source's errors carry display URLs).
func failedRead(id uint64) *reconcile.Result {
	r := converged(id)
	r.Revision = ""
	r.Outcome = reconcile.OutcomeFailed
	r.Phases = []reconcile.PhaseResult{{Phase: reconcile.PhaseRead, Duration: 2 * time.Second,
		Err: &reconcile.PhaseError{Phase: reconcile.PhaseRead, Reason: reconcile.ReasonUnavailable,
			Err: errors.New("fetch https://example.com/org/shop.git: connection refused")}}}
	r.Duration = 2 * time.Second
	r.Counts = reconcile.Counts{}
	return r
}

// sampled is a context whose span is sampled, with trace id n.
func sampled(n byte) context.Context {
	var tid trace.TraceID
	tid[15] = n
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled})
	return trace.ContextWithSpanContext(context.Background(), sc)
}

// newTestPage is a page with a fixed clock, fed results in order.
func newTestPage(info Info, o Options, results ...*reconcile.Result) *Page {
	if o.Now == nil {
		o.Now = func() time.Time { return t0.Add(time.Hour) }
	}
	p := New(info, o)
	for _, r := range results {
		p.TickEnd(context.Background(), r)
	}
	return p
}

// getRecorder serves path from h.
func getRecorder(t testing.TB, h http.Handler, path string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec
}

// get serves path from h and returns the status code and body.
func get(t testing.TB, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	b, err := io.ReadAll(rec.Result().Body)
	if err != nil {
		t.Fatal(err)
	}
	return rec.Code, string(b)
}
