package dashboards

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func build(t *testing.T) map[string][]byte {
	t.Helper()
	files, err := Build()
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return files
}

// The committed JSON is what Build makes, byte for byte, and nothing else.
func TestCommittedFilesAreGenerated(t *testing.T) {
	files := build(t)
	if again := build(t); len(again) != len(files) {
		t.Fatalf("Build is not deterministic: %d then %d files", len(files), len(again))
	} else {
		for name, b := range files {
			if !bytes.Equal(b, again[name]) {
				t.Errorf("Build is not deterministic: %s differs between two calls", name)
			}
		}
	}
	for name, want := range files {
		got, err := os.ReadFile(name)
		if err != nil {
			t.Errorf("%v: run make generate (go run ./dashboards/gen)", err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("dashboards/%s differs from Build's output: run make generate (go run ./dashboards/gen)", name)
		}
	}
	present, err := filepath.Glob("recond-*.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range present {
		if _, ok := files[name]; !ok {
			t.Errorf("dashboards/%s is not made by Build: run make generate (go run ./dashboards/gen), which removes it", name)
		}
	}
}

// Every query parses once Grafana's macros and variables are substituted.
func TestQueriesParse(t *testing.T) {
	queries, err := Queries(build(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(queries) == 0 {
		t.Fatal("no queries")
	}
	for _, q := range queries {
		if _, err := parse(q.Expr); err != nil {
			t.Errorf("%s: panel %q, %s: %s: %v", q.File, q.Panel, q.RefID, q.Expr, err)
		}
	}
}

func TestSubstitute(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`rate(m{namespace="$namespace"}[$__rate_interval])`, `rate(m{namespace="value"}[5m])`},
		{`rate(m{namespace=~"$namespace"}[${__interval}])`, `rate(m{namespace=~".+"}[5m])`},
		{`increase(m{a!~"x|${ns:regex}", b="[[ns]]"}[$__range])`, `increase(m{a!~"x|.+", b="value"}[5m])`},
		{`m / $__range_s + $__interval_ms`, `m / 300 + 300000`},
		{`label_replace(m, "a", "$1", "b", "(.*)")`, `label_replace(m, "a", "value", "b", "(.*)")`},
	} {
		if got := substitute(tc.in); got != tc.want {
			t.Errorf("substitute(%s) = %s, want %s", tc.in, got, tc.want)
		}
		if _, err := parse(tc.in); err != nil {
			t.Errorf("parse(%s): %v", tc.in, err)
		}
	}
	for _, bad := range []string{`rate(m[$__rate_interval]`, `sum by (le (m)`, `m{a="$x"`} {
		if _, err := parse(bad); err == nil {
			t.Errorf("parse(%s) succeeded, want an error", bad)
		}
	}
}

// Queries and MetricNames on a hand-written dashboard: rows, collapsed rows,
// other data sources, and every kind of variable query.
func TestQueriesOfHandWrittenDashboard(t *testing.T) {
	files := map[string][]byte{"d.json": []byte(`{
	  "panels": [
	    {"type": "row", "title": "r", "panels": [
	      {"title": "in row", "targets": [{"refId": "A", "expr": "rate(a_total{x=~\"$x\"}[$__rate_interval])"}]}
	    ]},
	    {"title": "p", "datasource": {"type": "prometheus", "uid": "${datasource}"}, "targets": [
	      {"refId": "A", "expr": "{__name__=\"b\"} + on() c_bucket"},
	      {"refId": "B", "datasource": {"type": "loki"}, "expr": "{app=\"x\"}"}
	    ]},
	    {"title": "other", "datasource": {"type": "tempo"}, "targets": [{"refId": "A", "expr": "not promql"}]}
	  ],
	  "templating": {"list": [
	    {"type": "datasource", "name": "datasource", "query": "prometheus"},
	    {"type": "query", "name": "x", "query": "label_values(d{job=\"j\"}, x)"},
	    {"type": "query", "name": "y", "query": {"query": "query_result(topk(1, e))", "refId": "V"}},
	    {"type": "query", "name": "z", "query": "label_values(z)"},
	    {"type": "query", "name": "w", "query": "metrics(f_.*)"},
	    {"type": "custom", "name": "c", "query": "a,b"}
	  ]}
	}`)}
	queries, err := Queries(files)
	if err != nil {
		t.Fatal(err)
	}
	wantQueries := []Query{
		{"d.json", "in row", "A", `rate(a_total{x=~"$x"}[$__rate_interval])`},
		{"d.json", "p", "A", `{__name__="b"} + on() c_bucket`},
		{"d.json", "variable y", "", `topk(1, e)`},
	}
	if !slices.Equal(queries, wantQueries) {
		t.Errorf("Queries = %q\nwant %q", queries, wantQueries)
	}
	names, err := MetricNames(files)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a_total", "b", "c_bucket", "d", "e"}; !slices.Equal(names, want) {
		t.Errorf("MetricNames = %q, want %q", names, want)
	}

	files["bad.json"] = []byte(`{"panels": [{"title": "t", "targets": [{"refId": "A", "expr": "sum(rate(x[5m])"}]}]}`)
	if _, err := MetricNames(files); err == nil || !strings.Contains(err.Error(), "bad.json: t:") {
		t.Errorf("MetricNames with a broken query: err = %v, want one naming bad.json and panel t", err)
	}
	files["bad.json"] = []byte(`{"panels": [`)
	if _, err := Queries(files); err == nil {
		t.Error("Queries of broken JSON succeeded")
	}
}

// Every panel queries the ${datasource} variable, every target has a refId
// unique in its panel, the uids are stable and unique, and both variables
// exist.
func TestPanelsVariablesAndUIDs(t *testing.T) {
	files := build(t)
	wantUID := map[string]string{OverviewFile: OverviewUID, NamespaceFile: NamespaceUID}
	wantMulti := map[string]bool{OverviewFile: true, NamespaceFile: false}
	if len(files) != len(wantUID) {
		t.Errorf("Build made %d files, want %d", len(files), len(wantUID))
	}
	uids := map[string]string{}
	for name, b := range files {
		d, err := decode(name, b)
		if err != nil {
			t.Fatal(err)
		}
		if d.UID != wantUID[name] {
			t.Errorf("%s: uid %q, want %q", name, d.UID, wantUID[name])
		}
		if other, ok := uids[d.UID]; ok {
			t.Errorf("%s and %s share uid %q", name, other, d.UID)
		}
		uids[d.UID] = name

		panels := 0
		walk(d.Panels, func(p jsonPanel) {
			if p.Type == "row" {
				return
			}
			panels++
			if !isVariable(p.Datasource) {
				t.Errorf("%s: panel %q: datasource %+v, want the ${datasource} variable", name, p.Title, p.Datasource)
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s: panel %q has no targets", name, p.Title)
			}
			refIDs := map[string]bool{}
			for i, tg := range p.Targets {
				if tg.RefID == "" {
					t.Errorf("%s: panel %q: target %d has no refId", name, p.Title, i)
				} else if refIDs[tg.RefID] {
					t.Errorf("%s: panel %q: refId %s used twice", name, p.Title, tg.RefID)
				}
				refIDs[tg.RefID] = true
				if !isVariable(tg.Datasource) {
					t.Errorf("%s: panel %q: target %s: datasource %+v, want the ${datasource} variable", name, p.Title, tg.RefID, tg.Datasource)
				}
			}
		})
		if panels == 0 {
			t.Errorf("%s has no panels", name)
		}

		var vars struct {
			Templating struct {
				List []struct {
					Type, Name, Query string
					Datasource        *jsonRef
					Multi             bool
					IncludeAll        bool
				}
			}
		}
		if err := json.Unmarshal(b, &vars); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		found := map[string]bool{}
		for _, v := range vars.Templating.List {
			found[v.Name] = true
			switch v.Name {
			case "datasource":
				if v.Type != "datasource" || v.Query != "prometheus" {
					t.Errorf("%s: variable datasource is a %q of %q, want a datasource variable of prometheus", name, v.Type, v.Query)
				}
			case "namespace":
				if v.Type != "query" || v.Query != "label_values(recond_build_info, namespace)" || !isVariable(v.Datasource) {
					t.Errorf("%s: variable namespace: %+v, want label_values(recond_build_info, namespace) from ${datasource}", name, v)
				}
				if v.Multi != wantMulti[name] || v.IncludeAll != wantMulti[name] {
					t.Errorf("%s: variable namespace: multi %t, include all %t, want %t", name, v.Multi, v.IncludeAll, wantMulti[name])
				}
			}
		}
		for _, v := range []string{"datasource", "namespace"} {
			if !found[v] {
				t.Errorf("%s: no %s variable", name, v)
			}
		}
	}
}

func isVariable(r *jsonRef) bool {
	return r != nil && r.Type == "prometheus" && r.UID == "${datasource}"
}

// What recond exports (docs/metrics.md), as scraped.
var (
	counters   = []string{"recond_ticks_total", "recond_phase_failures_total", "recond_resource_operations_total", "recond_loop_stalls_total", "recond_panics_total", "recond_watch_restarts_total"}
	gauges     = []string{"recond_last_tick_timestamp_seconds", "recond_last_success_timestamp_seconds", "recond_interval_seconds", "recond_managed_resources", "recond_drifted_resources", "recond_source_info", "recond_build_info", "recond_resources_health", "recond_health_status"}
	histograms = []string{"recond_tick_duration_seconds", "recond_phase_duration_seconds"}
)

func TestMetricNames(t *testing.T) {
	names, err := MetricNames(build(t))
	if err != nil {
		t.Fatal(err)
	}
	// Change this list with the dashboards: a typo in a new query shows here.
	want := []string{
		"ALERTS",
		"recond_build_info",
		"recond_drifted_resources",
		"recond_health_status",
		"recond_interval_seconds",
		"recond_last_success_timestamp_seconds",
		"recond_last_tick_timestamp_seconds",
		"recond_loop_stalls_total",
		"recond_managed_resources",
		"recond_panics_total",
		"recond_phase_duration_seconds_bucket",
		"recond_phase_failures_total",
		"recond_resource_operations_total",
		"recond_resources_health",
		"recond_source_info",
		"recond_tick_duration_seconds_bucket",
		"recond_ticks_total",
		"recond_watch_restarts_total",
	}
	if !slices.Equal(names, want) {
		t.Errorf("MetricNames = %q\nwant %q", names, want)
	}

	exported := map[string]bool{"ALERTS": true} // Prometheus's own
	for _, n := range append(counters, gauges...) {
		exported[n] = true
	}
	for _, h := range histograms {
		for _, suffix := range []string{"_bucket", "_count", "_sum"} {
			exported[h+suffix] = true
		}
	}
	for _, n := range names {
		if !exported[n] {
			t.Errorf("the dashboards query %s, which recond does not export", n)
		}
	}
}

// Latency panels (histogram_quantile or buckets) ask Prometheus for exemplars.
func TestLatencyPanelsHaveExemplars(t *testing.T) {
	latency := map[string]bool{}
	for name, b := range build(t) {
		d, err := decode(name, b)
		if err != nil {
			t.Fatal(err)
		}
		walk(d.Panels, func(p jsonPanel) {
			for _, tg := range p.Targets {
				if tg.Expr == nil || !strings.Contains(*tg.Expr, "histogram_quantile") && !strings.Contains(*tg.Expr, "_bucket") {
					continue
				}
				latency[p.Title] = true
				if !tg.Exemplar {
					t.Errorf("%s: panel %q: target %s has no exemplars: %s", name, p.Title, tg.RefID, *tg.Expr)
				}
			}
		})
	}
	for _, title := range []string{"Phase latency", "Tick duration", "Phase durations"} {
		if !latency[title] {
			t.Errorf("no latency panel %q", title)
		}
	}
}
