package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"recond.dev/recond/alerts"
	"recond.dev/recond/internal/testenv"
)

// monitored is a recond running with a 2 s interval against a repository
// that the test can take down, scraped by a real Prometheus that evaluates
// the shipped rules (generated for that interval).
type monitored struct {
	ns   string
	url  string // recond's listen address, as http://host:port
	repo *testenv.Repo
	down *atomic.Bool // true: the Git server answers 503
	prom *testenv.Prometheus
}

func startMonitored(t *testing.T, files map[string]string, flags ...string) *monitored {
	t.Helper()
	cp.Require(t)
	m := &monitored{repo: testenv.NewRepo(t), down: &atomic.Bool{}}
	m.repo.Commit("app", files)
	repoURL := m.repo.ServeHTTP(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if m.down.Load() {
				http.Error(w, "repository down for the test", http.StatusServiceUnavailable)
				return
			}
			next.ServeHTTP(w, r)
		})
	})
	args := clusterArgs(t, repoURL)
	m.ns = args[3]
	// A generous tick timeout: a slow tick on a loaded machine must not
	// count as a failure.
	r := startRun(t, "2s", true, append(append([]string{"--tick-timeout", "30s"}, flags...), args...)...)

	cfg := alerts.Default()
	cfg.LookBack = 2 * time.Minute
	cfg.FailureWindow = 5 * time.Second
	cfg.StalledFor, cfg.NotTickingFor, cfg.PhaseFailingFor = 2*time.Second, 2*time.Second, 2*time.Second
	cfg.DriftFor, cfg.ObserveSlowFor, cfg.TargetMissingFor = 10*time.Second, 10*time.Second, 10*time.Second
	cfg.DegradedFor, cfg.RevisionNotHealthyFor = 4*time.Second, time.Second
	cfg.SuspendedFor, cfg.SuspendEndingWithin, cfg.SuspendEndingFor = 2*time.Second, 30*time.Minute, time.Second
	rules, err := alerts.YAML(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m.url = "http://" + r.addr
	m.prom = testenv.StartPrometheus(t, r.addr, m.ns, string(rules))
	return m
}

// alerts returns recond's active alerts.
func (m *monitored) alerts(t *testing.T) []testenv.Alert {
	t.Helper()
	all, err := m.prom.Alerts()
	if err != nil {
		t.Fatal(err)
	}
	var recond []testenv.Alert
	for _, a := range all {
		if strings.HasPrefix(a.Labels["alertname"], "Recond") {
			recond = append(recond, a)
		}
	}
	return recond
}

// waitFor polls until cond holds on recond's alerts.
func (m *monitored) waitFor(t *testing.T, what string, cond func([]testenv.Alert) bool) []testenv.Alert {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		as := m.alerts(t)
		if cond(as) {
			return as
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 90s; alerts: %s", what, describe(as))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func describe(as []testenv.Alert) string {
	var s []string
	for _, a := range as {
		s = append(s, fmt.Sprintf("%s{phase=%q,reason=%q}=%s", a.Labels["alertname"], a.Labels["phase"], a.Labels["reason"], a.State))
	}
	slices.Sort(s)
	return strings.Join(s, " ")
}

func firing(as []testenv.Alert, name string, labels map[string]string) bool {
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

// The shipped rules, generated for a 2 s interval, evaluated by a real
// Prometheus scraping a real recond: quiet while the loop is healthy;
// RecondReconcileStalled and RecondPhaseFailing{phase="read"} fire when the
// repository becomes unreachable, and resolve when it comes back.
func TestAlertsWithRealPrometheus(t *testing.T) {
	start := time.Now()
	m := startMonitored(t, map[string]string{"cm.yaml": cmYAML})

	// Healthy: once Prometheus has scraped 3 times (the rules were
	// evaluated against the scrapes), no recond alert fires for 8 seconds
	// (8 evaluations).
	deadline := time.Now().Add(60 * time.Second)
	for {
		n, err := m.prom.Count(`count_over_time(up{job="recond"}[1m]) >= 3`)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Prometheus never scraped recond 3 times")
		}
		time.Sleep(250 * time.Millisecond)
	}
	for quiet := time.Now().Add(8 * time.Second); time.Now().Before(quiet); time.Sleep(500 * time.Millisecond) {
		for _, a := range m.alerts(t) {
			if a.State == "firing" {
				t.Fatalf("recond alert firing while the loop is healthy: %s", describe(m.alerts(t)))
			}
			t.Logf("pending while healthy: %s", describe([]testenv.Alert{a}))
		}
	}

	// The repository becomes unreachable.
	m.down.Store(true)
	failedAt := time.Now()
	as := m.waitFor(t, "stalled and read failing", func(as []testenv.Alert) bool {
		return firing(as, "RecondReconcileStalled", map[string]string{"namespace": m.ns, "severity": "critical"}) &&
			firing(as, "RecondPhaseFailing", map[string]string{"namespace": m.ns, "phase": "read", "reason": "unavailable"})
	})
	t.Logf("firing %s after the repository went down: %s", time.Since(failedAt).Round(time.Second), describe(as))
	for _, a := range as {
		if a.Labels["alertname"] == "RecondLoopNotTicking" || a.Labels["alertname"] == "RecondTargetMissing" {
			t.Errorf("%s fired although the loop ticks and is scraped", a.Labels["alertname"])
		}
	}

	// It comes back: both resolve.
	m.down.Store(false)
	back := time.Now()
	m.waitFor(t, "resolved", func(as []testenv.Alert) bool { return len(as) == 0 })
	t.Logf("resolved %s after the repository came back; whole test %s", time.Since(back).Round(time.Second), time.Since(start).Round(time.Second))
}

// The health alerts, evaluated by a real Prometheus scraping a real recond
// whose Deployment's controller the test plays: nothing rolls it out, so
// past --health-timeout (5 s here) it is failed: RecondRevisionNotHealthy
// and RecondDegraded fire; the rollout completes and both resolve.
func TestHealthAlertsWithRealPrometheus(t *testing.T) {
	m := startMonitored(t, map[string]string{"web.yaml": deployYAML}, "--health-timeout", "5s")
	start := time.Now()
	as := m.waitFor(t, "degraded and not healthy", func(as []testenv.Alert) bool {
		return firing(as, "RecondDegraded", map[string]string{"namespace": m.ns, "severity": "warning"}) &&
			firing(as, "RecondRevisionNotHealthy", map[string]string{"namespace": m.ns, "severity": "warning"})
	})
	t.Logf("firing %s after the first sync: %s", time.Since(start).Round(time.Second), describe(as))
	for _, a := range as {
		if a.Labels["alertname"] != "RecondDegraded" && a.Labels["alertname"] != "RecondRevisionNotHealthy" && a.State == "firing" {
			t.Errorf("%s fired: the loop itself is fine", a.Labels["alertname"])
		}
	}
	// The progress deadline made it failed: one HealthDegraded, however
	// many ticks saw it failed since.
	var degraded []string
	for _, e := range eventsOf(t, m.ns) {
		if strings.HasPrefix(e, "HealthDegraded ") {
			degraded = append(degraded, e)
		}
	}
	if len(degraded) != 1 || degraded[0] != "HealthDegraded Deployment/web" {
		t.Errorf("HealthDegraded Events %v, want one on Deployment/web", degraded)
	}
	rollout(t, m.ns, testenv.RolledOut)
	m.waitFor(t, "resolved", func(as []testenv.Alert) bool { return len(as) == 0 })
}

// The suspension's alerts, evaluated by a real Prometheus scraping a real
// recond: a suspension of an hour fires RecondSuspended at severity info;
// while suspended, a repository that goes down fails the read phase
// (RecondPhaseFailing) but does not fire RecondReconcileStalled; a
// suspension that ends within SuspendEndingWithin (30m here) fires the
// warning; resumed, with the repository back, everything resolves.
func TestSuspendAlertsWithRealPrometheus(t *testing.T) {
	token := writeFile(t, "token", "t0ken")
	m := startMonitored(t, map[string]string{"cm.yaml": cmYAML}, "--sync-token-file", token)
	suspend := func(d string) {
		t.Helper()
		var out, errOut strings.Builder
		if code := suspendCommand(context.Background(), false, []string{"--url", m.url, "--token-file", token, "--reason", "alert test", "--for", d}, &out, &errOut); code != 0 {
			t.Fatalf("recond suspend --for %s: exit %d, %s", d, code, errOut.String())
		}
	}
	suspend("1h")
	m.waitFor(t, "RecondSuspended info", func(as []testenv.Alert) bool {
		return firing(as, "RecondSuspended", map[string]string{"namespace": m.ns, "severity": "info"})
	})

	m.down.Store(true)
	as := m.waitFor(t, "read failing while suspended", func(as []testenv.Alert) bool {
		return firing(as, "RecondPhaseFailing", map[string]string{"namespace": m.ns, "phase": "read"})
	})
	// Long enough for the stall alert to fire were the instance not
	// suspended: 3 intervals (6 s) and its for (2 s), twice over.
	for quiet := time.Now().Add(16 * time.Second); time.Now().Before(quiet); time.Sleep(500 * time.Millisecond) {
		as = m.alerts(t)
		if firing(as, "RecondReconcileStalled", nil) {
			t.Fatalf("RecondReconcileStalled fired for a suspended instance: %s", describe(as))
		}
	}
	if !firing(as, "RecondSuspended", map[string]string{"severity": "info"}) {
		t.Errorf("RecondSuspended info resolved while suspended: %s", describe(as))
	}

	suspend("10m")
	m.waitFor(t, "RecondSuspended warning", func(as []testenv.Alert) bool {
		return firing(as, "RecondSuspended", map[string]string{"namespace": m.ns, "severity": "warning"}) &&
			!firing(as, "RecondSuspended", map[string]string{"severity": "info"})
	})

	var out, errOut strings.Builder
	if code := suspendCommand(context.Background(), true, []string{"--url", m.url, "--token-file", token}, &out, &errOut); code != 0 {
		t.Fatalf("recond resume: exit %d, %s", code, errOut.String())
	}
	m.down.Store(false)
	m.waitFor(t, "resolved", func(as []testenv.Alert) bool { return len(as) == 0 })
}
