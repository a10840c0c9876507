package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"recond.dev/recond/internal/testenv"
)

// rollout plays the Deployment controller (testenv.RollOut).
func rollout(t *testing.T, ns, progress string) {
	t.Helper()
	if err := testenv.RollOut(context.Background(), cp.Client, ns, "web", progress); err != nil {
		t.Fatal(err)
	}
}

// eventsOf returns the namespace's Events as "Reason Kind/name".
func eventsOf(t *testing.T, ns string) []string {
	t.Helper()
	l, err := cp.Client.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range l.Items {
		s := e.Reason + " " + e.Regarding.Kind + "/" + e.Regarding.Name
		if e.Series != nil {
			// A repeat folded into the first Event: it counts.
			s += fmt.Sprintf(" x%d", e.Series.Count)
		}
		out = append(out, s)
	}
	return out
}

// eventsRecorded is the sum of recond_events_total: every Event recond
// handed to the recorder, repeats included (the API shows a repeat only as
// a series count, and late).
func eventsRecorded(t *testing.T, addr string) float64 {
	t.Helper()
	var sum float64
	for _, l := range strings.Split(get(t, "http://"+addr+"/metrics"), "\n") {
		if strings.HasPrefix(l, "recond_events_total{") {
			var v float64
			if _, err := fmt.Sscan(l[strings.LastIndex(l, " ")+1:], &v); err == nil {
				sum += v
			}
		}
	}
	return sum
}

// waitEvent waits until the namespace has an Event "Reason Kind/name".
func waitEvent(t *testing.T, ns, want string, log *testenv.SyncBuffer) []string {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // a guard against a hang
	for {
		got := eventsOf(t, ns)
		for _, e := range got {
			if e == want {
				return got
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Event %q after a minute; Events %v; log:\n%s", want, got, log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// metricLine returns the line of /metrics that starts with series.
func metricLine(t *testing.T, addr, series string) string {
	t.Helper()
	for _, l := range strings.Split(get(t, "http://"+addr+"/metrics"), "\n") {
		if strings.HasPrefix(l, series+" ") {
			return l
		}
	}
	return ""
}

// TestHealthAndEventsEndToEnd runs `recond run` (watch mode) on a
// Deployment whose controller the test plays: in progress, rolled out
// (healthy), stuck (degraded: HealthDegraded), fixed (HealthRecovered), each
// Event once; then 20 converged ticks send no Event.
func TestHealthAndEventsEndToEnd(t *testing.T) {
	cp.Require(t)
	ns := cp.Namespace(t)
	repo := testenv.NewRepo(t)
	repo.Commit("web", map[string]string{"web.yaml": deployYAML, "cm.yaml": cmYAML})
	// A tick timeout well above a tick's cost (the interval by default):
	// a tick cut short on a loaded machine would send an Event of its own.
	r := startRun(t, "250ms", false, "--repo", repo.URL(), "--namespace", ns, "--kubeconfig", cp.WriteKubeConfig(t),
		"--cache-dir", t.TempDir(), "--leader-elect=false", "--tick-timeout", "30s")

	waitEvent(t, ns, "RevisionApplied ConfigMap/recond-inventory-recond", r.log)
	waitEvent(t, ns, "Created Deployment/web", r.log)
	waitEvent(t, ns, "Created ConfigMap/c", r.log)
	if l := metricLine(t, r.addr, `recond_health_status{status="progressing"}`); !strings.HasSuffix(l, " 1") {
		t.Errorf("before the rollout: %q, want progressing 1", l)
	}

	rollout(t, ns, testenv.RolledOut)
	waitEvent(t, ns, "RevisionHealthy ConfigMap/recond-inventory-recond", r.log)
	if l := metricLine(t, r.addr, `recond_health_status{status="healthy"}`); !strings.HasSuffix(l, " 1") {
		t.Errorf("rolled out: %q, want healthy 1", l)
	}
	if l := metricLine(t, r.addr, "recond_revision_healthy_timestamp_seconds"); l == "" || strings.HasSuffix(l, " 0") {
		t.Errorf("rolled out: %q, want the time it became healthy", l)
	}

	rollout(t, ns, testenv.DeadlineExceeded)
	waitEvent(t, ns, "HealthDegraded Deployment/web", r.log)
	if l := metricLine(t, r.addr, `recond_health_status{status="degraded"}`); !strings.HasSuffix(l, " 1") {
		t.Errorf("stuck: %q, want degraded 1", l)
	}
	if l := metricLine(t, r.addr, `recond_resources_health{health="failed"}`); !strings.HasSuffix(l, " 1") {
		t.Errorf("stuck: %q, want 1 failed object", l)
	}
	if !strings.Contains(r.log.String(), `"health_status":"degraded"`) || !strings.Contains(r.log.String(), `Deployment/web (failed: `) {
		t.Errorf("the tick line does not carry the health and the unhealthy object:\n%s", r.log.String())
	}

	rollout(t, ns, testenv.RolledOut)
	waitEvent(t, ns, "HealthRecovered Deployment/web", r.log)

	// One Event per transition, none for the converged ticks in between.
	counts := map[string]int{}
	for _, e := range eventsOf(t, ns) {
		counts[e]++
	}
	for e, n := range counts {
		if n != 1 {
			t.Errorf("%d Events %q, want 1", n, e)
		}
	}
	before := len(eventsOf(t, ns))
	recorded := eventsRecorded(t, r.addr)
	if recorded != float64(before) {
		t.Errorf("recond_events_total says %v Events recorded, the API server has %d: %v", recorded, before, eventsOf(t, ns))
	}
	ticks := strings.Count(r.log.String(), `"msg":"tick"`)
	deadline := time.Now().Add(2 * time.Minute) // a guard against a hang
	for strings.Count(r.log.String(), `"msg":"tick"`) < ticks+20 {
		if time.Now().After(deadline) {
			t.Fatal("20 ticks did not come within 2 minutes")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // an Event sent by mistake is written by now
	if after := eventsOf(t, ns); len(after) != before {
		t.Errorf("20 converged ticks sent %d Events: %v", len(after)-before, after)
	}
	if n := eventsRecorded(t, r.addr); n != recorded {
		t.Errorf("20 converged ticks recorded %v Events (repeats included)", n-recorded)
	}
}

// TestHealthRulesAreCheckedAtStart: a rules file that does not compile stops
// recond before it does anything, naming the rule and the field.
func TestHealthRulesAreCheckedAtStart(t *testing.T) {
	repo := testenv.NewRepo(t)
	repo.Commit("cm", map[string]string{"cm.yaml": cmYAML})
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rules, []byte("rules:\n- apiVersion: example.com/v1\n  kind: Widget\n  current: 'status.phase =='\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := recond(t, append([]string{"sync", "--health-rules", rules}, clusterArgs(t, repo.URL())...)...)
	if code != 2 || !strings.Contains(stderr, "--health-rules") || !strings.Contains(stderr, "Widget") || !strings.Contains(stderr, "current") {
		t.Errorf("exit %d, stderr %q; want 2 and an error naming the flag, the rule and the field", code, stderr)
	}
}
