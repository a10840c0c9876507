package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"recond.dev/recond/internal/testenv"
)

func writeFile(t testing.TB, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestManualSync: on a 3 m interval, POST /api/v1/sync with the token asks
// for a tick at once; `recond trigger --wait` waits for it and reports its
// outcome. A wrong or missing token is 401 and asks for nothing.
func TestManualSync(t *testing.T) {
	cp.Require(t)
	ns := cp.Namespace(t)
	repo := testenv.NewRepo(t)
	repo.Commit("cm", map[string]string{"cm.yaml": cmYAML})
	tokenFile := writeFile(t, "token", "s3cret-token\n")
	r := startRun(t, "3m", true, "--repo", repo.URL(), "--namespace", ns, "--kubeconfig", cp.WriteKubeConfig(t),
		"--cache-dir", t.TempDir(), "--leader-elect=false", "--sync-token-file", tokenFile)

	post := func(auth string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, "http://"+r.addr+"/api/v1/sync", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		return resp
	}
	for _, auth := range []string{"", "Bearer wrong", "Basic czNjcmV0LXRva2Vu", "Bearer s3cret-token-and-more"} {
		if resp := post(auth); resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("Authorization %q: %s, want 401 with WWW-Authenticate", auth, resp.Status)
		}
	}
	if strings.Count(r.log.String(), `"msg":"tick"`) != 1 {
		t.Fatalf("refused requests asked for a tick:\n%s", r.log.String())
	}
	if strings.Contains(r.log.String(), "s3cret-token") {
		t.Error("the log shows the token")
	}

	// A new commit, then a sync now: the tick that serves it applies it.
	repo.Commit("change", map[string]string{"cm.yaml": strings.Replace(cmYAML, "k: v", "k: now", 1)})
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := trigger(context.Background(), []string{"--url", "http://" + r.addr, "--token-file", tokenFile, "--wait", "--timeout", "1m"}, &stdout, &stderr)
	took := time.Since(start)
	if code != 0 || !strings.Contains(stdout.String(), "tick 2: applied") {
		t.Fatalf("recond trigger --wait: exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
	t.Logf("recond trigger --wait on a 3m interval: %s (%s)", took.Round(time.Millisecond), strings.TrimSpace(stdout.String()))
	cm, err := cp.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "c", metav1.GetOptions{})
	if err != nil || cm.Data["k"] != "now" {
		t.Fatalf("after the synced tick: %v, %v", cm.Data, err)
	}
	if !strings.Contains(r.log.String(), `"trigger":"manual"`) {
		t.Errorf("the tick line does not say trigger manual:\n%s", r.log.String())
	}

	// The answer is at once, with the id to wait for.
	resp, err := http.DefaultClient.Do(func() *http.Request {
		req, _ := http.NewRequest(http.MethodPost, "http://"+r.addr+"/api/v1/sync", nil)
		req.Header.Set("Authorization", "Bearer s3cret-token")
		return req
	}())
	if err != nil {
		t.Fatal(err)
	}
	var ans syncAnswer
	err = json.NewDecoder(resp.Body).Decode(&ans)
	resp.Body.Close()
	// The next tick to start: 3, unless something else (a watch event on
	// a busy machine) started one since.
	if err != nil || resp.StatusCode != http.StatusAccepted || ans.Tick < 3 || ans.Status != fmt.Sprintf("/api/v1/ticks/%d", ans.Tick) {
		t.Errorf("POST /api/v1/sync: %s %+v %v, want 202 for tick 3 or later, with its status path", resp.Status, ans, err)
	}
}

func TestFollows(t *testing.T) {
	cases := []struct {
		ref    string
		pushed map[string]bool
	}{
		{"main", map[string]bool{"refs/heads/main": true, "refs/heads/dev": false, "refs/tags/main": true, "refs/heads/main2": false}},
		{"refs/heads/main", map[string]bool{"refs/heads/main": true, "refs/tags/main": false}},
		{"v1.2.0", map[string]bool{"refs/tags/v1.2.0": true, "refs/tags/v1.2.1": false}},
		{"", map[string]bool{"refs/heads/anything": true, "refs/tags/v1": false}},
		{strings.Repeat("ab", 20), map[string]bool{"refs/heads/main": false}},
	}
	for _, c := range cases {
		f := follows(c.ref)
		for pushed, want := range c.pushed {
			if got := f(pushed); got != want {
				t.Errorf("--ref %q, push to %s: follows = %v, want %v", c.ref, pushed, got, want)
			}
		}
	}
}

// TestWebhookTriggers: on a 3 m interval with --ref main, a signed push to
// main asks for a tick at once (trigger webhook); a push to another branch,
// a replay and a wrong signature ask for none; a burst of 50 pushes gives one
// or two ticks, not 50.
func TestWebhookTriggers(t *testing.T) {
	cp.Require(t)
	ns := cp.Namespace(t)
	repo := testenv.NewRepo(t)
	repo.Commit("cm", map[string]string{"cm.yaml": cmYAML})
	secret := writeFile(t, "secret", benchWebhookSecret+"\n")
	r := startRun(t, "3m", true, "--repo", repo.URL(), "--ref", "main", "--namespace", ns, "--kubeconfig", cp.WriteKubeConfig(t),
		"--cache-dir", t.TempDir(), "--leader-elect=false", "--webhook-secret-file", secret)
	hooks := "http://" + r.addr + "/hooks/git"
	send := func(req *http.Request) int {
		t.Helper()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	webhookTicks := func() int { return strings.Count(r.log.String(), `"trigger":"webhook"`) }
	waitTicks := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); webhookTicks() < n; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d webhook ticks, want %d; log:\n%s", webhookTicks(), n, r.log.String())
			}
		}
	}

	repo.Commit("change", map[string]string{"cm.yaml": strings.Replace(cmYAML, "k: v", "k: pushed", 1)})
	if code := send(benchPush(hooks, "d-1")); code != http.StatusAccepted {
		t.Fatalf("signed push to main: %d, want 202", code)
	}
	waitTicks(1)
	cm, err := cp.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "c", metav1.GetOptions{})
	if err != nil || cm.Data["k"] != "pushed" {
		t.Fatalf("after the webhook tick: %v, %v", cm.Data, err)
	}

	// Asks for nothing: a replay, another branch, a bad signature.
	if code := send(benchPush(hooks, "d-1")); code != http.StatusOK {
		t.Errorf("replayed delivery: %d, want 200 (acknowledged, not acted on)", code)
	}
	other := testenv.GitHubPush(hooks, "d-2", []byte(`{"ref":"refs/heads/dev","after":"1111111111111111111111111111111111111111"}`), benchWebhookSecret)
	if code := send(other); code != http.StatusOK {
		t.Errorf("push to dev: %d, want 200 (ignored)", code)
	}
	if code := send(testenv.GitHubPush(hooks, "d-3", []byte(`{"ref":"refs/heads/main"}`), "not-the-secret")); code != http.StatusUnauthorized {
		t.Errorf("wrong signature: %d, want 401", code)
	}
	time.Sleep(500 * time.Millisecond)
	if n := webhookTicks(); n != 1 {
		t.Errorf("%d webhook ticks after a replay, a push to dev and a bad signature, want still 1", n)
	}
	if strings.Contains(r.log.String(), benchWebhookSecret) {
		t.Error("the log shows the secret")
	}

	// A burst of 50 pushes (distinct deliveries) coalesces.
	codes := map[int]int{}
	for i := range 50 {
		codes[send(benchPush(hooks, fmt.Sprintf("burst-%d", i)))]++
	}
	waitTicks(2)                // the burst's first tick has run
	time.Sleep(2 * time.Second) // and a second one, if the burst asked for two
	burst := webhookTicks() - 1
	t.Logf("a burst of 50 pushes: answers %v, %d ticks", codes, burst)
	if burst < 1 || burst > 2 {
		t.Errorf("a burst of 50 pushes gave %d ticks, want 1 or 2", burst)
	}
}

// TestEndpointsAreOffUnlessAsked: without --sync-token-file and
// --webhook-secret-file there is no sync or webhook endpoint; with
// --status-page=false no page, and a tick's details only with the token.
func TestEndpointsAreOffUnlessAsked(t *testing.T) {
	cp.Require(t)
	repo := testenv.NewRepo(t)
	repo.Commit("cm", map[string]string{"cm.yaml": cmYAML})
	do := func(method, url, auth string) int {
		t.Helper()
		req, _ := http.NewRequest(method, url, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	plain := startRun(t, "1h", true, append([]string{"--leader-elect=false"}, clusterArgs(t, repo.URL())...)...)
	for _, path := range []string{"/api/v1/sync", "/hooks/git"} {
		if code := do(http.MethodPost, "http://"+plain.addr+path, "Bearer x"); code != http.StatusNotFound && code != http.StatusMethodNotAllowed {
			t.Errorf("POST %s without its flag: %d, want 404 or 405", path, code)
		}
	}
	if code := do(http.MethodGet, "http://"+plain.addr+"/", ""); code != http.StatusOK {
		t.Errorf("GET / with the status page on (the default): %d", code)
	}
	plain.stop()

	token := writeFile(t, "token", "t0ken")
	off := startRun(t, "1h", true, append([]string{"--leader-elect=false", "--status-page=false", "--sync-token-file", token}, clusterArgs(t, repo.URL())...)...)
	for _, path := range []string{"/", "/ticks/1", "/api/v1/status"} {
		if code := do(http.MethodGet, "http://"+off.addr+path, ""); code != http.StatusNotFound {
			t.Errorf("GET %s with --status-page=false: %d, want 404", path, code)
		}
	}
	if code := do(http.MethodGet, "http://"+off.addr+"/api/v1/ticks/1", ""); code != http.StatusUnauthorized {
		t.Errorf("a tick's details without the page and without the token: %d, want 401", code)
	}
	if code := do(http.MethodGet, "http://"+off.addr+"/api/v1/ticks/1", "Bearer t0ken"); code != http.StatusOK {
		t.Errorf("a tick's details with the token: %d, want 200", code)
	}
}

// TestStandbyPromisesNoTick: a process waiting for its instance's Lease
// answers sync requests 503 (its loop does not run; the leader's does).
func TestStandbyPromisesNoTick(t *testing.T) {
	cp.Require(t)
	repo := testenv.NewRepo(t)
	repo.Commit("cm", map[string]string{"cm.yaml": cmYAML})
	args := clusterArgs(t, repo.URL())
	token := writeFile(t, "token", "t0ken")
	startRun(t, "1h", true, append([]string{"--sync-token-file", token}, args...)...)
	standby := startRun(t, "1h", false, append([]string{"--sync-token-file", token}, args...)...)
	waitReady(t, standby.addr, standby.log) // ready as standby: it knows whom it waits for
	req, _ := http.NewRequest(http.MethodPost, "http://"+standby.addr+"/api/v1/sync", nil)
	req.Header.Set("Authorization", "Bearer t0ken")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("sync request to the standby: %s, want 503", resp.Status)
	}
}
