package alerts

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql/parser"

	"recond.dev/recond/internal/testenv/tools"
)

// The committed files are exactly what the generator writes.
func TestCommittedFilesAreGenerated(t *testing.T) {
	for path, gen := range Files() {
		want, err := gen()
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join("..", path))
		if err != nil {
			t.Fatalf("%s: %v (run make generate)", path, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the generator's output: run make generate", path)
		}
	}
}

func TestRulesAreComplete(t *testing.T) {
	rf, err := Rules(Default())
	if err != nil {
		t.Fatal(err)
	}
	runbooks, err := os.ReadFile("../docs/runbooks.md")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rf.Groups[0].Rules {
		names = append(names, r.Alert)
		if _, err := parser.NewParser(parser.Options{}).ParseExpr(r.Expr); err != nil {
			t.Errorf("%s: %v\n%s", r.Alert, err, r.Expr)
		}
		for _, a := range []string{"summary", "description", "runbook_url"} {
			if r.Annotations[a] == "" {
				t.Errorf("%s has no %s", r.Alert, a)
			}
		}
		if s := r.Labels["severity"]; s != "critical" && s != "warning" && s != "info" {
			t.Errorf("%s severity %q", r.Alert, s)
		}
		if r.For == "" || r.For == "0s" {
			t.Errorf("%s has no for", r.Alert)
		}
		if !strings.Contains(string(runbooks), "\n## "+r.Alert+"\n") {
			t.Errorf("docs/runbooks.md has no section %q for %s", "## "+r.Alert, r.Annotations["runbook_url"])
		}
	}
	want := "RecondReconcileStalled,RecondLoopNotTicking,RecondPhaseFailing,RecondDriftPersisting,RecondObserveSlow,RecondTargetMissing,RecondDegraded,RecondRevisionNotHealthy,RecondTickAbandoned,RecondPanicked,RecondSuspended,RecondSuspended"
	if got := strings.Join(names, ","); got != want {
		t.Errorf("alerts %s, want %s", got, want)
	}
}

func TestConfigChangesTheRules(t *testing.T) {
	cfg := Default()
	cfg.StallIntervals = 5
	cfg.Selector = `job="tenant-recond"`
	cfg.StalledFor = 90 * time.Second
	cfg.RunbookBase = "https://runbooks.example/recond"
	cfg.DegradedFor = 25 * time.Minute
	cfg.RevisionNotHealthyFor = 3 * time.Minute
	cfg.SuspendedFor = 2 * time.Hour
	cfg.SuspendEndingWithin = 30 * time.Minute
	cfg.Info = "notice"
	b, err := YAML(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, want := range []string{
		`5 * max by (namespace, job) (recond_interval_seconds{job="tenant-recond"})`,
		"for: 1m30s",
		"runbook_url: https://runbooks.example/recond#recondreconcilestalled",
		"successfully in 5 intervals",
		"for: 25m",
		"for: 3m",
		"have failed for 25m.",
		`recond_resources_health{job="tenant-recond", health="failed"}`,
		`> recond_health_timeout_seconds{job="tenant-recond"}`,
		"unless on (namespace, job)",
		`max by (namespace, job) (recond_suspended{job="tenant-recond"}) == 1`,
		`max by (namespace, job) (recond_suspended_until_timestamp_seconds{job="tenant-recond"}) - time() >= 1800`,
		`max by (namespace, job) (recond_suspended_until_timestamp_seconds{job="tenant-recond"}) - time() < 1800`,
		"for: 2h",
		"severity: notice",
		"suspended for more than 2h:",
		"ends in less than 30m:",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("rules for 5 intervals lack %q", want)
		}
	}
	if strings.Contains(s, `job="recond"`) {
		t.Error("the default selector survived a custom one")
	}
	if _, err := YAML(Config{StallIntervals: 0}); err == nil {
		t.Error("0 stall intervals accepted")
	}
}

func TestDur(t *testing.T) {
	for d, want := range map[time.Duration]string{
		5 * time.Minute: "5m", 90 * time.Second: "1m30s", 6 * time.Hour: "6h", 36 * time.Hour: "1d12h",
		1500 * time.Millisecond: "1s500ms", 0: "0s",
	} {
		if got := dur(d); got != want {
			t.Errorf("dur(%s) = %s, want %s", d, got, want)
		}
	}
}

// promtool checks the rule file and runs the unit tests in tests/.
func TestPromtool(t *testing.T) {
	bin := tools.Find(t, tools.Promtool)
	out, err := exec.Command(bin, "check", "rules", "recond.rules.yaml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	tests, _ := filepath.Glob("tests/*.yaml")
	if len(tests) == 0 {
		t.Fatal("no rule tests in alerts/tests")
	}
	out, err = exec.Command(bin, append([]string{"test", "rules"}, tests...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	// Every alert is exercised by at least one firing expectation.
	all := ""
	for _, f := range tests {
		b, _ := os.ReadFile(f)
		all += string(b)
	}
	rf, _ := Rules(Default())
	for _, r := range rf.Groups[0].Rules {
		if !regexp.MustCompile(`alertname: ` + r.Alert + `\n\s+exp_alerts:\n\s+- exp_labels`).MatchString(all) {
			t.Errorf("no promtool test expects %s to fire", r.Alert)
		}
	}
	t.Logf("%s", out)
}
