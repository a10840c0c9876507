package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/reconcile/source/renderer"
)

var cp *testenv.ControlPlane

// TestMain lets the test binary serve as the render binary of the runs it
// starts (recond starts its render binary, here the test binary, which
// answers with recond's own build).
func TestMain(m *testing.M) {
	renderer.RunIfAsked(version)
	if exe, err := os.Executable(); err == nil {
		os.Setenv("RECOND_RENDER_BINARY", exe)
	}
	os.Exit(testenv.RunTests(m, &cp))
}

const cmYAML = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  k: v\n"

// recond runs the command in-process and returns its exit code and output.
func recond(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code := run(ctx, args, &stdout, &stderr)
	t.Logf("recond %s -> %d\n%s", strings.Join(args, " "), code, stderr.String())
	return code, stdout.String(), stderr.String()
}

func clusterArgs(t *testing.T, repo string) []string {
	t.Helper()
	cp.Require(t)
	return []string{"--repo", repo, "--namespace", cp.Namespace(t), "--kubeconfig", cp.WriteKubeConfig(t),
		"--log-format", "json", "--cache-dir", t.TempDir()}
}

func TestDiffExitCodes(t *testing.T) {
	repo := testenv.NewRepo(t)
	repo.Commit("cm", map[string]string{"cm.yaml": cmYAML})
	args := clusterArgs(t, repo.URL())

	code, out, _ := recond(t, append([]string{"diff"}, args...)...)
	if code != 1 || strings.TrimSpace(out) != "ConfigMap/c: create" {
		t.Fatalf("diff before sync: exit %d, output %q; want 1 and a create", code, out)
	}
	if code, _, _ := recond(t, append([]string{"sync"}, args...)...); code != 0 {
		t.Fatalf("sync: exit %d", code)
	}
	if code, out, _ := recond(t, append([]string{"diff"}, args...)...); code != 0 || out != "" {
		t.Fatalf("diff after sync: exit %d, output %q; want 0 and nothing", code, out)
	}
	repo.Commit("change", map[string]string{"cm.yaml": strings.Replace(cmYAML, "k: v", "k: w", 1)})
	code, out, _ = recond(t, append([]string{"diff"}, args...)...)
	if code != 1 || strings.TrimSpace(out) != `ConfigMap/c data.k: "v" -> "w"` {
		t.Fatalf("diff after commit: exit %d, output %q", code, out)
	}
	code, out, _ = recond(t, append([]string{"diff", "--output", "json"}, args...)...)
	var got diffJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil || code != 1 {
		t.Fatalf("json diff: exit %d, %v: %s", code, err, out)
	}
	if len(got.Changes) != 1 || got.Changes[0].Fields[0].Path != "data.k" || got.Changes[0].Fields[0].Desired != "w" || len(got.Revision) != 40 {
		t.Errorf("json diff = %+v", got)
	}
	// An error (a repository that does not exist) is exit 2.
	bad := clusterArgs(t, t.TempDir()+"/nothing")
	if code, _, stderr := recond(t, append([]string{"diff"}, bad...)...); code != 2 || !strings.Contains(stderr, `"reason":"not_found"`) {
		t.Errorf("diff of a missing repository: exit %d, want 2 with reason not_found", code)
	}
	if code, _, _ := recond(t, append([]string{"sync"}, bad...)...); code != 1 {
		t.Errorf("sync of a missing repository: exit %d, want 1", code)
	}
}

func TestDryRunFlagFromEnvironment(t *testing.T) {
	repo := testenv.NewRepo(t)
	repo.Commit("cm", map[string]string{"cm.yaml": cmYAML})
	args := clusterArgs(t, repo.URL())
	t.Setenv("RECOND_DRY_RUN", "true")
	if code, _, stderr := recond(t, append([]string{"sync"}, args...)...); code != 0 || !strings.Contains(stderr, `"outcome":"out_of_sync"`) {
		t.Fatalf("dry-run sync: exit %d", code)
	}
	// Nothing was written, so a diff still shows the create.
	t.Setenv("RECOND_DRY_RUN", "false")
	if code, _, _ := recond(t, append([]string{"diff"}, args...)...); code != 1 {
		t.Errorf("diff after a dry run: exit %d, want 1", code)
	}
}

func TestRunServesHealthAndReadiness(t *testing.T) {
	repo := testenv.NewRepo(t)
	repo.Commit("cm", map[string]string{"cm.yaml": cmYAML})
	r := startRun(t, "1h", true, clusterArgs(t, repo.URL())...)
	resp, err := http.Get("http://" + r.addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz = %d", resp.StatusCode)
	}
	stopped := make(chan int)
	go func() { stopped <- r.stop() }()
	select {
	case code := <-stopped:
		if code != 0 {
			t.Errorf("run exit %d after SIGTERM-like cancel", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not stop")
	}
}

func TestRunNotReadyWhileTicksFail(t *testing.T) {
	r := startRun(t, "1h", false, clusterArgs(t, t.TempDir()+"/missing")...)
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(r.log.String(), `"msg":"tick"`) {
		if time.Now().After(deadline) {
			t.Fatal("no tick")
		}
		time.Sleep(50 * time.Millisecond)
	}
	resp, err := http.Get("http://" + r.addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/readyz = %d after a failed tick, want 503", resp.StatusCode)
	}
}

// running is `recond run` in-process, serving on addr.
type running struct {
	addr string
	log  *testenv.SyncBuffer
	stop func() int // cancels the run and returns its exit code
}

// startRun runs `recond run --listen 127.0.0.1:0 --interval <interval>
// args...`, learns the address from its "serving" log line and, when ready
// is true, waits until /readyz answers 200. The run is stopped when the test
// ends, if the test did not stop it.
func startRun(t *testing.T, interval string, ready bool, args ...string) *running {
	t.Helper()
	r := &running{log: &testenv.SyncBuffer{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"run", "--listen", "127.0.0.1:0", "--interval", interval, "--log-format", "json"}, args...), io.Discard, r.log)
	}()
	var code *int
	r.stop = func() int {
		if code == nil {
			cancel()
			c := <-done
			code = &c
		}
		return *code
	}
	t.Cleanup(func() { r.stop() })
	serving := regexp.MustCompile(`"msg":"serving"[^\n]*"address":"([^"]+)"`)
	deadline := time.Now().Add(time.Minute) // a guard against a hang
	for {
		if m := serving.FindStringSubmatch(r.log.String()); m != nil {
			r.addr = m[1]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("recond run never served; log:\n%s", r.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if ready {
		waitReady(t, r.addr, r.log)
	}
	return r
}

// waitReady polls /readyz until it answers 200 (for up to a minute, a
// guard against a hang).
func waitReady(t *testing.T, addr string, log *testenv.SyncBuffer) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("never ready; log:\n%s", log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestFlags(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		args    []string
		check   func(*options) string
		wantErr string
	}{
		{name: "defaults", args: []string{"--repo", "r", "--namespace", "n"}, check: func(o *options) string {
			if o.interval != 3*time.Minute || o.tickTimeout != o.interval || !o.rec.Prune || !o.rec.SelfHeal || o.rec.DryRun || o.path != "." || o.name != "recond" || o.listen != ":8080" {
				return fmt.Sprintf("%+v", *o)
			}
			return ""
		}},
		{name: "env", env: map[string]string{"RECOND_SELF_HEAL": "false", "RECOND_REPO": "r", "RECOND_NAMESPACE": "n", "RECOND_TICK_TIMEOUT": "30s"}, check: func(o *options) string {
			if o.rec.SelfHeal || o.repo != "r" || o.tickTimeout != 30*time.Second {
				return fmt.Sprintf("%+v", *o)
			}
			return ""
		}},
		{name: "args win over env", env: map[string]string{"RECOND_PRUNE": "false"}, args: []string{"--repo", "r", "--namespace", "n", "--prune=true"}, check: func(o *options) string {
			if !o.rec.Prune {
				return "prune false"
			}
			return ""
		}},
		{name: "namespace from pod", env: map[string]string{"POD_NAMESPACE": "team-a"}, args: []string{"--repo", "r"}, check: func(o *options) string {
			if o.namespace != "team-a" {
				return o.namespace
			}
			return ""
		}},
		{name: "no repo", args: []string{"--namespace", "n"}, wantErr: "--repo is required"},
		{name: "bad env", env: map[string]string{"RECOND_PRUNE": "maybe"}, args: []string{"--repo", "r", "--namespace", "n"}, wantErr: "RECOND_PRUNE"},
		{name: "bad interval", args: []string{"--repo", "r", "--namespace", "n", "--interval", "0s"}, wantErr: "--interval"},
		{name: "bad leader-elect mode", args: []string{"--repo", "r", "--namespace", "n", "--leader-elect-mode", "hold"}, wantErr: "--leader-elect-mode"},
		{name: "commit URL without placeholder", args: []string{"--repo", "r", "--namespace", "n", "--commit-url-template", "https://github.com/o/r/commit/"}, wantErr: "--commit-url-template"},
		{name: "trace URL not http", args: []string{"--repo", "r", "--namespace", "n", "--trace-url-template", "javascript:alert({trace_id})"}, wantErr: "--trace-url-template"},
		{name: "link templates", args: []string{"--repo", "r", "--namespace", "n", "--commit-url-template", "https://github.com/o/r/commit/{revision}",
			"--trace-url-template", "http://jaeger:16686/trace/{trace_id}"},
			check: func(o *options) string {
				if o.page.CommitURLTemplate == "" || o.page.TraceURLTemplate == "" || !o.statusPage {
					return fmt.Sprintf("templates %q %q, status page %v", o.page.CommitURLTemplate, o.page.TraceURLTemplate, o.statusPage)
				}
				return ""
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("POD_NAMESPACE", "")
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			o, err := parseFlags("run", tc.args, &bytes.Buffer{})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if msg := tc.check(o); msg != "" {
				t.Error(msg)
			}
		})
	}
}

func TestUsageAndVersion(t *testing.T) {
	if code, out, _ := recond(t, "version"); code != 0 || out != "recond dev\n" {
		t.Errorf("version: %d %q", code, out)
	}
	if code, _, _ := recond(t); code != 2 {
		t.Errorf("no command: exit %d", code)
	}
	if code, _, errOut := recond(t, "frobnicate"); code != 2 || !strings.Contains(errOut, "unknown command") {
		t.Errorf("unknown command: exit %d", code)
	}
	if code, _, errOut := recond(t, "sync", "--namespace", "x"); code != 2 || !strings.Contains(errOut, "--repo is required") {
		t.Errorf("missing --repo: exit %d", code)
	}
}

func TestAlertsCommand(t *testing.T) {
	code, out, _ := recond(t, "alerts", "--stall-intervals", "5")
	if code != 0 || !strings.Contains(out, "5 * max by (namespace, job) (recond_interval_seconds") || !strings.Contains(out, "alert: RecondReconcileStalled") {
		t.Errorf("alerts --stall-intervals 5: exit %d\n%s", code, out)
	}
	code, out, _ = recond(t, "alerts", "--prometheus-rule")
	if code != 0 || !strings.Contains(out, "kind: PrometheusRule") {
		t.Errorf("alerts --prometheus-rule: exit %d", code)
	}
	if code, _, _ := recond(t, "alerts", "--stall-intervals", "0"); code != 2 {
		t.Errorf("alerts --stall-intervals 0: exit %d, want 2", code)
	}
}
