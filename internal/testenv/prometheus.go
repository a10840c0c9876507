package testenv

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"recond.dev/recond/internal/testenv/tools"
)

// Prometheus is a running Prometheus server on 127.0.0.1 that scrapes and
// evaluates rules every second.
type Prometheus struct {
	// URL is the server's base URL.
	URL string
}

// StartPrometheus runs the Prometheus binary (tools.Prometheus:
// $PROMETHEUS_BIN, or prometheus on PATH, Debian's package) with the rule file
// content rules, scraping target as job "recond" with the given namespace
// label, and stops it when the test ends.
func StartPrometheus(t testing.TB, target, namespace, rules string) *Prometheus {
	t.Helper()
	bin := tools.Find(t, tools.Prometheus)
	dir := t.TempDir()
	rulesFile := filepath.Join(dir, "recond.rules.yaml")
	if err := os.WriteFile(rulesFile, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: recond
    static_configs:
      - targets: [%q]
        labels:
          namespace: %q
`, rulesFile, target, namespace)
	cfgFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &Prometheus{URL: fmt.Sprintf("http://127.0.0.1:%d", tools.FreePorts(t, 1)[0])}
	tools.Start(t, bin, []string{"--config.file=" + cfgFile, "--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=" + p.URL[len("http://"):], "--log.level=warn"}, func() error {
		resp, err := http.Get(p.URL + "/-/ready")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("ready: %s", resp.Status)
		}
		return nil
	})
	return p
}

// Alert is an active (pending or firing) alert.
type Alert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
}

// Alerts returns the active alerts.
func (p *Prometheus) Alerts() ([]Alert, error) {
	var out struct {
		Data struct{ Alerts []Alert } `json:"data"`
	}
	if err := getJSON(p.URL+"/api/v1/alerts", &out); err != nil {
		return nil, err
	}
	return out.Data.Alerts, nil
}

// Count evaluates an instant query and returns the number of series.
func (p *Prometheus) Count(query string) (int, error) {
	var out struct {
		Data struct{ Result []json.RawMessage } `json:"data"`
	}
	if err := getJSON(p.URL+"/api/v1/query?query="+url.QueryEscape(query), &out); err != nil {
		return 0, err
	}
	return len(out.Data.Result), nil
}
