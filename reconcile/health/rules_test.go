package health

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestParseRulesErrors(t *testing.T) {
	const widget = "- apiVersion: example.com/v1\n  kind: Widget\n  current: 'true'\n"
	for _, tc := range []struct {
		name    string
		in      string
		wantErr string
	}{
		{"unknown top-level field", "rule: []\n", `unknown field "rule"`},
		{"unknown rule field", "rules:\n- apiVersion: example.com/v1\n  kind: Widget\n  current: 'true'\n  healthy: 'true'\n",
			`unknown field "healthy"`},
		{"flux spelling in_progress refused", "rules:\n- apiVersion: example.com/v1\n  kind: Widget\n  current: 'true'\n  in_progress: 'true'\n",
			`unknown field "in_progress"`},
		{"missing apiVersion", "rules:\n- kind: Widget\n  current: 'true'\n", "rule 1: apiVersion is required"},
		{"missing kind", "rules:\n- apiVersion: example.com/v1\n  current: 'true'\n", "rule 1: kind is required"},
		{"group without version", "rules:\n- apiVersion: example.com\n  kind: Widget\n  current: 'true'\n",
			`rule 1: apiVersion "example.com": want group/version`},
		{"missing current", "rules:\n" + widget + "- apiVersion: example.com/v1\n  kind: Gadget\n  failed: 'true'\n",
			"rule 2 (example.com Gadget): current is required"},
		{"duplicate across versions", "rules:\n" + widget + "- apiVersion: example.com/v2\n  kind: Widget\n  current: 'false'\n",
			"rule 2 (example.com Widget): same group and kind as rule 1"},
		{"bad CEL", "rules:\n" + widget + "- apiVersion: example.com/v1\n  kind: Gadget\n  current: 'true'\n  failed: 'status.phase == foo'\n",
			"rule 2 (example.com Gadget): failed: ERROR: <input>:1:17: undeclared reference to 'foo'"},
		{"syntax error", "rules:\n- apiVersion: v1\n  kind: Service\n  current: 'status.phase =='\n",
			"rule 1 (core Service): current: ERROR: <input>:1:"},
		{"non-bool", "rules:\n- apiVersion: example.com/v1\n  kind: Widget\n  current: '\"Ready\"'\n",
			"rule 1 (example.com Widget): current: type is string, want bool"},
		{"non-bool int", "rules:\n- apiVersion: example.com/v1\n  kind: Widget\n  current: 'true'\n  inProgress: '1 + 1'\n",
			"rule 1 (example.com Widget): inProgress: type is int, want bool"},
		{"not YAML", "rules: [\n", "parse:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseRules([]byte(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseRules error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestParseRulesValid(t *testing.T) {
	r, err := ParseRules([]byte(`
rules:
- apiVersion: example.com/v1
  kind: Widget
  current: 'status.phase == "Ready"'
- apiVersion: example.com/v1
  kind: Gadget
  current: 'object.status.ready'      # dyn: decided at evaluation
- apiVersion: v1
  kind: Service
  current: 'has(status.loadBalancer.ingress)'
`))
	if err != nil {
		t.Fatal(err)
	}
	if r.Len() != 3 {
		t.Errorf("Len = %d, want 3", r.Len())
	}
	if (*Rules)(nil).Len() != 0 {
		t.Error("nil Rules: Len != 0")
	}
	for _, gk := range []groupKind{{"example.com", "Widget"}, {"example.com", "Gadget"}, {"", "Service"}} {
		if r.lookup(gk.group, gk.kind) == nil {
			t.Errorf("no rule for %s", gk)
		}
	}
	if r.lookup("example.org", "Widget") != nil {
		t.Error("rule for example.com Widget matches example.org Widget")
	}
}

func widget(status map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1",
		"kind":       "Widget",
		"metadata":   map[string]any{"name": "w", "namespace": "app", "generation": int64(1)},
		"spec":       map[string]any{"size": int64(2)},
	}}
	if status != nil {
		u.Object["status"] = status
	}
	return u
}

func TestRulesEvaluate(t *testing.T) {
	full := widgetRules(t, `current: 'status.phase == "Ready"'`, `inProgress: 'status.phase == "Pending"'`,
		`failed: 'object.status.phase == "Failed" || status.errors > 3'`)
	currentOnly := widgetRules(t, `current: 'status.phase == "Ready" && spec.size == 2 && kind == "Widget" && metadata.name == "w"'`)
	for _, tc := range []struct {
		name    string
		rules   *Rules
		status  map[string]any
		want    Status
		wantMsg string
	}{
		{"phase ready", full, map[string]any{"phase": "Ready"}, Current, ""},
		{"phase failed", full, map[string]any{"phase": "Failed"}, Failed, `health rule failed is true: object.status.phase == "Failed"`},
		{"phase pending", full, map[string]any{"phase": "Pending"}, InProgress, "health rule inProgress is true"},
		// inProgress is evaluated before current (Flux's order).
		{"inProgress before current", widgetRules(t, "current: 'true'", `inProgress: 'status.phase == "Pending"'`),
			map[string]any{"phase": "Pending"}, InProgress, "inProgress"},
		// failed before current.
		{"failed before current", widgetRules(t, "current: 'true'", "failed: 'status.errors > 3'"),
			map[string]any{"errors": int64(4)}, Failed, "failed"},
		{"no expression true", full, map[string]any{"phase": "Provisioning", "errors": int64(0)}, InProgress, "no health rule expression is true"},
		// errors is missing: failed errors, the others are false.
		{"one errors, none true", full, map[string]any{"phase": "Provisioning"}, InProgress, "no health rule expression is true (failed: no such key: errors)"},
		{"missing status", full, nil, Unknown, "every health rule expression failed: inProgress: no such attribute"},
		{"missing status via object", widgetRules(t, `current: 'object.status.phase == "Ready"'`), nil, Unknown, "current: no such key: status"},
		{"top-level variables", currentOnly, map[string]any{"phase": "Ready"}, Current, ""},
		{"dyn result not bool", widgetRules(t, "current: 'status.phase'"), map[string]any{"phase": "Ready"}, Unknown, "current: result is string, not bool"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Assess(widget(tc.status), tc.rules)
			checkAssessment(t, got, tc.want, tc.wantMsg)
		})
	}
}

func TestRulesCostLimit(t *testing.T) {
	// 200^3 = 8,000,000 iterations over spec.items: far past CostLimit.
	r := widgetRules(t, "current: 'spec.items.all(a, spec.items.all(b, spec.items.all(c, a + b + c >= 0)))'")
	items := make([]any, 200)
	for i := range items {
		items[i] = int64(i)
	}
	u := widget(map[string]any{"phase": "Ready"})
	u.Object["spec"] = map[string]any{"items": items}
	got := Assess(u, r)
	if got.Status != Unknown || !strings.Contains(got.Message, "cost limit exceeded") {
		t.Errorf("Assess = %+v, want unknown: cost limit exceeded", got)
	}
	// The same expression over few items is within the limit and true.
	u.Object["spec"] = map[string]any{"items": items[:5]}
	if got := Assess(u, r); got.Status != Current {
		t.Errorf("small input: Assess = %+v, want current", got)
	}
}

func TestLoadRules(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(good, []byte("rules:\n- apiVersion: example.com/v1\n  kind: Widget\n  current: 'true'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := LoadRules(good)
	if err != nil || r.Len() != 1 {
		t.Fatalf("LoadRules = %v, %v; want 1 rule", r.Len(), err)
	}

	// Exactly at the cap is read; one byte more is refused.
	atCap := []byte("rules: []\n" + strings.Repeat("#", MaxRulesSize-len("rules: []\n")))
	for _, tc := range []struct {
		name    string
		data    []byte
		wantErr string
	}{
		{"at cap", atCap, ""},
		{"over cap", append(atCap, '#'), "larger than 1048576 bytes"},
		{"bad rule names the file", []byte("rules:\n- kind: Widget\n  current: 'true'\n"), "rules-bad-rule-names-the-file.yaml: rule 1: apiVersion is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, "rules-"+strings.ReplaceAll(tc.name, " ", "-")+".yaml")
			if err := os.WriteFile(p, tc.data, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := LoadRules(p)
			if tc.wantErr == "" {
				if err != nil {
					t.Errorf("LoadRules: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("LoadRules error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
	if _, err := LoadRules(filepath.Join(dir, "absent.yaml")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: err = %v, want not-exist", err)
	}
}

func mustRules(tb testing.TB, s string) *Rules {
	tb.Helper()
	r, err := ParseRules([]byte(s))
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// widgetRules is one rule for example.com/v1 Widget with the expressions
// exprs, each a line such as "current: 'true'".
func widgetRules(tb testing.TB, exprs ...string) *Rules {
	tb.Helper()
	s := "rules:\n- apiVersion: example.com/v1\n  kind: Widget\n"
	for _, e := range exprs {
		s += "  " + e + "\n"
	}
	return mustRules(tb, s)
}
