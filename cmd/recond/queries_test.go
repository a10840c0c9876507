package main

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"

	"recond.dev/recond/alerts"
	"recond.dev/recond/dashboards"
	"recond.dev/recond/internal/testenv"
)

// Every metric that a shipped alert or dashboard queries is one that a real
// recond exports after a tick (scraped, not typed by hand), or one that
// Prometheus itself makes (up, ALERTS).
func TestShippedQueriesUseExportedMetrics(t *testing.T) {
	repo := testenv.NewRepo(t)
	repo.Commit("cm", map[string]string{"cm.yaml": cmYAML})
	r := startRun(t, "1h", true, clusterArgs(t, repo.URL())...)
	resp, err := http.Get("http://" + r.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	tp := expfmt.NewTextParser(model.UTF8Validation)
	families, err := tp.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{"up": true, "ALERTS": true}
	for name, mf := range families {
		exported[name] = true
		if mf.GetType() == dto.MetricType_HISTOGRAM {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				exported[name+s] = true
			}
		}
	}

	used := map[string][]string{} // metric -> where
	rf, err := alerts.Rules(alerts.Default())
	if err != nil {
		t.Fatal(err)
	}
	p := parser.NewParser(parser.Options{})
	for _, r := range rf.Groups[0].Rules {
		expr, err := p.ParseExpr(r.Expr)
		if err != nil {
			t.Fatalf("%s: %v", r.Alert, err)
		}
		parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
			if vs, ok := n.(*parser.VectorSelector); ok {
				used[vs.Name] = append(used[vs.Name], "alert "+r.Alert)
			}
			return nil
		})
	}
	files := map[string][]byte{}
	paths, _ := filepath.Glob("../../dashboards/recond-*.json")
	for _, f := range paths {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(f)] = b
	}
	if len(files) != 2 {
		t.Fatalf("found %d dashboards, want 2", len(files))
	}
	names, err := dashboards.MetricNames(files)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		used[n] = append(used[n], "dashboards")
	}
	if len(used) < 12 {
		t.Fatalf("only %d metric names found in alerts and dashboards: %v", len(used), used)
	}
	var missing []string
	for n, where := range used {
		if !exported[n] {
			missing = append(missing, n+" (used by "+strings.Join(slices.Compact(where), ", ")+")")
		}
	}
	slices.Sort(missing)
	for _, m := range missing {
		t.Errorf("not exported by recond: %s", m)
	}
}
