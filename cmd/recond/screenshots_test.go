package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"recond.dev/recond/dashboards"
	"recond.dev/recond/internal/testenv/tools"
)

// TestDashboardScreenshots renders the main panels of both dashboards, with
// the dashboards' own queries, from a real Prometheus that scraped a real
// recond through drift, new commits and an unreachable repository, as PNGs
// (headless Chromium on Prometheus's graph page). It runs only with
// RECOND_SCREENSHOTS_DIR set: `make screenshots` writes docs/img.
func TestDashboardScreenshots(t *testing.T) {
	out := os.Getenv("RECOND_SCREENSHOTS_DIR")
	if out == "" {
		t.Skip("RECOND_SCREENSHOTS_DIR not set (make screenshots)")
	}
	cp.Require(t)
	chromium := tools.Find(t, tools.Chromium)
	m := startMonitored(t, map[string]string{"cm.yaml": cmYAML, "deploy.yaml": deployYAML})
	ctx, ns, repo, down, p := context.Background(), m.ns, m.repo, m.down, m.prom

	// A scripted minute and a half: drift, commits, an outage.
	scale := func(n int32) {
		s := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: n}}
		if _, err := cp.Client.AppsV1().Deployments(ns).UpdateScale(ctx, "web", s, metav1.UpdateOptions{FieldManager: "kubectl"}); err != nil {
			t.Fatal(err)
		}
	}
	step := func(d time.Duration, what string) { t.Log(what); time.Sleep(d) }
	step(15*time.Second, "healthy")
	scale(4)
	step(10*time.Second, "drift healed")
	repo.Commit("v2", map[string]string{"deploy.yaml": strings.Replace(deployYAML, "nginx:1.27", "nginx:1.28", 1)})
	step(10*time.Second, "new commit")
	down.Store(true)
	step(25*time.Second, "repository down")
	down.Store(false)
	repo.Commit("v3", map[string]string{"cm2.yaml": strings.Replace(cmYAML, "name: c", "name: c2", 1)})
	step(15*time.Second, "back, new commit")
	scale(6)
	step(10*time.Second, "drift healed")

	files := map[string][]byte{}
	for _, f := range []string{dashboards.OverviewFile, dashboards.NamespaceFile} {
		b, err := os.ReadFile(filepath.Join("../../dashboards", f))
		if err != nil {
			t.Fatal(err)
		}
		files[f] = b
	}
	qs, err := dashboards.Queries(files)
	if err != nil {
		t.Fatal(err)
	}
	panels := []struct{ file, panel, png string }{
		{dashboards.OverviewFile, "Ticks by outcome", "overview-ticks-by-outcome.png"},
		{dashboards.OverviewFile, "Phase failures by phase and reason", "overview-failures.png"},
		{dashboards.OverviewFile, "Time since last success vs stall threshold", "overview-since-last-success.png"},
		{dashboards.NamespaceFile, "Phase latency", "namespace-phase-latency.png"},
		{dashboards.NamespaceFile, "Apply operations by action and result", "namespace-apply-operations.png"},
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	vars := strings.NewReplacer("$__rate_interval", "10s", "$__interval", "1s", "$__range", "2m",
		`=~"$namespace"`, `=~"`+ns+`"`, "$namespace", ns, "${namespace}", ns)
	for _, pn := range panels {
		v := url.Values{}
		n := 0
		for _, q := range qs {
			if q.File != pn.file || q.Panel != pn.panel {
				continue
			}
			g := fmt.Sprintf("g%d.", n)
			v.Set(g+"expr", vars.Replace(q.Expr))
			v.Set(g+"tab", "0")
			v.Set(g+"range_input", "2m")
			n++
		}
		if n == 0 {
			t.Fatalf("no queries for panel %q of %s", pn.panel, pn.file)
		}
		png := filepath.Join(out, pn.png)
		cmd := exec.Command(chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
			"--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
			"--user-data-dir="+t.TempDir(), "--window-size=1200,"+fmt.Sprint(340+n*620), "--virtual-time-budget=8000",
			"--screenshot="+png, p.URL+"/graph?"+v.Encode())
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("chromium: %v\n%s", err, b)
		}
		st, err := os.Stat(png)
		if err != nil || st.Size() < 10_000 {
			t.Fatalf("%s: %v (%d bytes)", png, err, st.Size())
		}
		t.Logf("%s: %s (%d queries)", png, pn.panel, n)
	}
}
