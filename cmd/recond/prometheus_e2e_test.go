package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"recond.dev/recond/alerts"
	"recond.dev/recond/internal/testenv"
)

// prometheusServer is a real Prometheus scraping one recond every second.
type prometheusServer struct {
	url string
}

// startPrometheus runs the Prometheus binary ($PROMETHEUS_BIN, or prometheus
// on PATH; the Makefile installs Debian's package) with rules, scraping
// target as job "recond" with the given namespace label, everything on
// 127.0.0.1.
func startPrometheus(t *testing.T, target, namespace, rules string) *prometheusServer {
	t.Helper()
	bin := os.Getenv("PROMETHEUS_BIN")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("prometheus"); err != nil {
			t.Fatal("no Prometheus server: run the tests with `make test`, which installs one")
		}
	}
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
	addr := freeAddr(t)
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+cfgFile, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		logf.Close()
	})
	p := &prometheusServer{url: "http://" + addr}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if resp, err := http.Get(p.url + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		select {
		case <-exited:
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("prometheus exited:\n%s", b)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("prometheus not ready after 60s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type promAlert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
}

// alerts returns recond's pending and firing alerts.
func (p *prometheusServer) alerts(t *testing.T) []promAlert {
	t.Helper()
	resp, err := http.Get(p.url + "/api/v1/alerts")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Data struct{ Alerts []promAlert } `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	var recond []promAlert
	for _, a := range out.Data.Alerts {
		if strings.HasPrefix(a.Labels["alertname"], "Recond") {
			recond = append(recond, a)
		}
	}
	return recond
}

// query evaluates an instant query and returns the number of series.
func (p *prometheusServer) query(t *testing.T, q string) int {
	t.Helper()
	resp, err := http.Get(p.url + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Data struct{ Result []json.RawMessage } `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return len(out.Data.Result)
}

func describe(as []promAlert) string {
	var s []string
	for _, a := range as {
		s = append(s, fmt.Sprintf("%s{phase=%q,reason=%q}=%s", a.Labels["alertname"], a.Labels["phase"], a.Labels["reason"], a.State))
	}
	slices.Sort(s)
	return strings.Join(s, " ")
}

// waitFor polls until cond holds on recond's alerts.
func (p *prometheusServer) waitFor(t *testing.T, what string, cond func([]promAlert) bool) []promAlert {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		as := p.alerts(t)
		if cond(as) {
			return as
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 90s; alerts: %s", what, describe(as))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func firing(as []promAlert, name string, labels map[string]string) bool {
	for _, a := range as {
		if a.Labels["alertname"] != name || a.State != "firing" {
			continue
		}
		ok := true
		for k, v := range labels {
			ok = ok && a.Labels[k] == v
		}
		if ok {
			return true
		}
	}
	return false
}

// The shipped rules, generated for a 1 s interval, evaluated by a real
// Prometheus scraping a real recond: quiet while the loop is healthy;
// RecondReconcileStalled and RecondPhaseFailing{phase="read"} fire when the
// repository becomes unreachable, and resolve when it comes back.
func TestAlertsWithRealPrometheus(t *testing.T) {
	if cp == nil {
		t.Skip("needs kube-apiserver, etcd and Prometheus")
	}
	start := time.Now()
	repo := testenv.NewRepo(t)
	repo.Commit("cm", map[string]string{"cm.yaml": cmYAML})
	var down atomic.Bool
	repoURL := repo.ServeHTTP(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if down.Load() {
				http.Error(w, "repository down for the test", http.StatusServiceUnavailable)
				return
			}
			next.ServeHTTP(w, r)
		})
	})
	args := clusterArgs(t, repoURL)
	ns := args[3]
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncBuffer
	go run(ctx, append([]string{"run", "--listen", addr, "--interval", "1s"}, args...), io.Discard, &stderr)
	waitReady(t, addr, &stderr)

	cfg := alerts.Default()
	cfg.LookBack = 2 * time.Minute
	cfg.FailureWindow = 5 * time.Second
	cfg.StalledFor, cfg.NotTickingFor, cfg.PhaseFailingFor = 2*time.Second, 2*time.Second, 2*time.Second
	cfg.DriftFor, cfg.ObserveSlowFor, cfg.TargetMissingFor = 10*time.Second, 10*time.Second, 10*time.Second
	rules, err := alerts.YAML(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := startPrometheus(t, addr, ns, string(rules))

	// Healthy: once Prometheus has scraped 3 times (the rules were
	// evaluated against the scrapes), no recond alert, not even pending,
	// for 8 seconds (8 evaluations).
	deadline := time.Now().Add(60 * time.Second)
	for p.query(t, `count_over_time(up{job="recond"}[1m]) >= 3`) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("Prometheus never saw converged ticks")
		}
		time.Sleep(250 * time.Millisecond)
	}
	for quiet := time.Now().Add(8 * time.Second); time.Now().Before(quiet); time.Sleep(500 * time.Millisecond) {
		if as := p.alerts(t); len(as) > 0 {
			t.Fatalf("recond alerts while the loop is healthy: %s", describe(as))
		}
	}

	// The repository becomes unreachable.
	down.Store(true)
	failedAt := time.Now()
	as := p.waitFor(t, "stalled and read failing", func(as []promAlert) bool {
		return firing(as, "RecondReconcileStalled", map[string]string{"namespace": ns, "severity": "critical"}) &&
			firing(as, "RecondPhaseFailing", map[string]string{"namespace": ns, "phase": "read", "reason": "unavailable"})
	})
	t.Logf("firing %s after the repository went down: %s", time.Since(failedAt).Round(time.Second), describe(as))
	for _, a := range as {
		if a.Labels["alertname"] == "RecondLoopNotTicking" || a.Labels["alertname"] == "RecondTargetMissing" {
			t.Errorf("%s fired although the loop ticks and is scraped", a.Labels["alertname"])
		}
	}

	// It comes back: both resolve.
	down.Store(false)
	back := time.Now()
	p.waitFor(t, "resolved", func(as []promAlert) bool { return len(as) == 0 })
	t.Logf("resolved %s after the repository came back; whole test %s", time.Since(back).Round(time.Second), time.Since(start).Round(time.Second))
}
