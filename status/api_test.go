package status

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"recond.dev/recond/reconcile"
	"recond.dev/recond/reconcile/source"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}

// scripted is a page with every kind of tick and a few objects.
func scripted() *Page {
	p := newTestPage(testInfo, Options{ObjectsPerPage: 3,
		Progress: func() reconcile.Progress { return reconcile.Progress{Started: 4, Finished: 4} }},
		withObjects(converged(1), 5), secretTick(2), failedRead(3))
	last := withObjects(converged(4), 5)
	last.Chart = &source.Chart{Name: "shop", Version: "1.2.3", Values: []string{"prod.yaml"}}
	p.TickEnd(sampled(4), last)
	return p
}

// TestStatusSchema: the JSON's field names are the documented ones
// (testdata/status.json), and it decodes into Status and encodes back to the
// same bytes.
func TestStatusSchema(t *testing.T) {
	checkSchema(t, scripted().Handler(), "/api/v1/status", "status.json", &Status{})
}

// TestTickSchema: the same for GET /api/v1/ticks/{id}.
func TestTickSchema(t *testing.T) {
	checkSchema(t, scripted().TicksHandler(), "/api/v1/ticks/2", "tick.json", &TickState{})
}

// checkSchema gets path from h: indented, the body is the golden file
// testdata/<file>; it decodes into v without unknown fields, and v encodes
// back to the same bytes.
func checkSchema(t *testing.T, h http.Handler, path, file string, v any) {
	t.Helper()
	_, body := get(t, h, path)
	var indented bytes.Buffer
	if err := json.Indent(&indented, []byte(body), "", "  "); err != nil {
		t.Fatal(err)
	}
	golden(t, file, indented.Bytes())

	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode: %v", err)
	}
	again, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(strings.TrimSpace(body), string(again)); diff != "" {
		t.Errorf("round trip (-served +re-encoded):\n%s", diff)
	}
}

// TestWriteTable: `recond status` prints testdata/table.golden for the
// scripted page, fetched over HTTP.
func TestWriteTable(t *testing.T) {
	srv := httptest.NewServer(scripted().Handler())
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, url := range []string{srv.URL, srv.URL + "/", srv.URL + "/api/v1/status"} {
		s, err := Fetch(ctx, url)
		if err != nil {
			t.Fatalf("Fetch(%s): %v", url, err)
		}
		var out bytes.Buffer
		if err := WriteTable(&out, s); err != nil {
			t.Fatal(err)
		}
		golden(t, "table.golden", out.Bytes())
	}
}

// TestFetchErrors: Fetch refuses what is not a status.
func TestFetchErrors(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/bad/api/v1/status", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "nope", http.StatusForbidden) })
	mux.HandleFunc("/old/api/v1/status", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"schema":"v0"}`)) })
	mux.HandleFunc("/junk/api/v1/status", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`<html>`)) })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, tc := range []struct{ url, want string }{
		{srv.URL + "/bad", "403 Forbidden: nope"},
		{srv.URL + "/old", `schema "v0"`},
		{srv.URL + "/junk", "decode status"},
		{"ftp://example.com", "want http or https"},
		{"http://user:pw@127.0.0.1:1", "get status"},
	} {
		_, err := Fetch(context.Background(), tc.url)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Fetch(%s) = %v, want an error with %q", tc.url, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), ":pw@") {
			t.Errorf("Fetch(%s) error shows the password: %v", tc.url, err)
		}
	}
}

// TestChartInHeader: the page's header names the chart the last revision
// rendered, with its values files.
func TestChartInHeader(t *testing.T) {
	_, body := get(t, scripted().Handler(), "/")
	if !strings.Contains(body, `id="chart">shop 1.2.3 <span class="m">values</span> prod.yaml<`) {
		t.Errorf("the header does not name the chart:\n%s", body)
	}
}
