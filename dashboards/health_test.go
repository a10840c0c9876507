package dashboards

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"recond.dev/recond/internal/testenv/tools"
)

// healthExpr evaluated by Prometheus (promtool's PromQL unit tests): each
// status gives its code, no assessment yet gives 0, and of two processes
// that overlap (a rolling restart) the worse status wins, per namespace and
// across namespaces.
func TestHealthExprWithPromtool(t *testing.T) {
	bin := tools.Find(t, tools.Promtool)
	// One value per minute, for pod p1 of namespace a: not assessed,
	// healthy, progressing, unknown, degraded, healthy. Pod p2 exists from
	// 5m only, progressing. Namespace b stays healthy.
	series := map[string]string{}
	// pod adds the recond_health_status series of one process, a values
	// string per status: healthy, progressing, unknown, degraded.
	pod := func(namespace, pod string, values ...string) {
		for i, status := range []string{"healthy", "progressing", "unknown", "degraded"} {
			series[fmt.Sprintf(`recond_health_status{namespace=%q, pod=%q, status=%q}`, namespace, pod, status)] = values[i]
		}
	}
	pod("a", "p1", "0 1 0 0 0 1", "0 0 1 0 0 0", "0 0 0 1 0 0", "0 0 0 0 1 0")
	pod("a", "p2", "_ _ _ _ _ 0", "_ _ _ _ _ 1", "_ _ _ _ _ 0", "_ _ _ _ _ 0")
	pod("b", "p1", "1 1 1 1 1 1", "0 0 0 0 0 0", "0 0 0 0 0 0", "0 0 0 0 0 0")
	wantA := []int{0, 1, 2, 3, 4, 2}
	perNamespace := healthExpr("namespace", `namespace=~"a|b"`)
	one := healthExpr("", `namespace="a"`)

	var b strings.Builder
	b.WriteString("evaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n")
	for s, v := range series {
		fmt.Fprintf(&b, "      - series: %s\n        values: %s\n", quote(s), quote(v))
	}
	b.WriteString("    promql_expr_test:\n")
	for minute, a := range wantA {
		fmt.Fprintf(&b, "      - expr: %s\n        eval_time: %dm\n        exp_samples:\n", quote(perNamespace), minute)
		fmt.Fprintf(&b, "          - labels: '{namespace=\"a\"}'\n            value: %d\n", a)
		fmt.Fprintf(&b, "          - labels: '{namespace=\"b\"}'\n            value: 1\n")
		fmt.Fprintf(&b, "      - expr: %s\n        eval_time: %dm\n        exp_samples:\n", quote(one), minute)
		fmt.Fprintf(&b, "          - labels: '{}'\n            value: %d\n", a)
	}
	file := filepath.Join(t.TempDir(), "health.yaml")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "test", "rules", file).CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s\n%s", err, out, b.String())
	}
}

// The timeline's value mappings name every code healthExpr gives, and
// nothing else.
func TestHealthTimelineMappings(t *testing.T) {
	for name, b := range build(t) {
		var d struct {
			Panels []struct {
				Type, Title string
				FieldConfig struct {
					Defaults struct {
						Mappings []struct {
							Type    string
							Options json.RawMessage
						}
					}
				}
			}
		}
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, p := range d.Panels {
			if p.Type != "state-timeline" || !strings.Contains(p.Title, "ealth") {
				continue
			}
			found = true
			got := map[string]string{}
			for _, m := range p.FieldConfig.Defaults.Mappings {
				if m.Type != "value" {
					continue
				}
				var options map[string]struct{ Text string }
				if err := json.Unmarshal(m.Options, &options); err != nil {
					t.Fatalf("%s: panel %q: %v", name, p.Title, err)
				}
				for k, v := range options {
					got[k] = v.Text
				}
			}
			want := map[string]string{"0": "not assessed", "1": "healthy", "2": "progressing", "3": "unknown", "4": "degraded"}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s: panel %q maps %v, want %v", name, p.Title, got, want)
			}
		}
		if !found {
			t.Errorf("%s has no health timeline", name)
		}
	}
}

// quote writes s as a YAML (JSON) string.
func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
