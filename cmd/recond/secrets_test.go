package main

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"recond.dev/recond/internal/testenv"
)

// Credentials in the repository URL or in a token file are used to fetch,
// and appear nowhere else: not in logs, not in span attributes or events
// (the exported OTLP bytes are searched), not in metric labels.
func TestSecretsNeverLeak(t *testing.T) {
	const (
		password = "hunter2-url-s3cret"
		token    = "tok-file-s3cret-42"
		wrong    = "wrong-pass-s3cret"
	)
	repo := testenv.NewRepo(t)
	repo.Commit("cm", map[string]string{"cm.yaml": cmYAML})
	base := repo.ServeHTTP(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			u, p, ok := r.BasicAuth()
			if !ok || !(u == "deploy" && p == password || u == "git" && p == token) {
				w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	})
	spansSent := collectOTLP(t)

	withCreds := strings.Replace(base, "http://", "http://deploy:"+password+"@", 1)
	args := clusterArgs(t, withCreds)
	var logs bytes.Buffer

	// recond run with credentials in the URL: ticks succeed; scrape /metrics.
	r := startRun(t, "1h", true, args...)
	resp, err := http.Get("http://" + r.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metricsBody, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	pages := get(t, "http://"+r.addr+"/") + get(t, "http://"+r.addr+"/api/v1/status") + get(t, "http://"+r.addr+"/ticks/1")
	r.stop()
	logs.WriteString(r.log.String())

	// A token file, and a wrong password (a failing read whose error is
	// logged, recorded on the span and counted).
	tokenFile := t.TempDir() + "/token"
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokArgs := append([]string{"sync", "--git-token-file", tokenFile}, clusterArgs(t, base)...)
	code, _, errOut := recond(t, tokArgs...)
	if code != 0 {
		t.Fatalf("sync with a token file: exit %d", code)
	}
	logs.WriteString(errOut)
	code, _, errOut = recond(t, append([]string{"sync"}, clusterArgs(t, strings.Replace(base, "http://", "http://deploy:"+wrong+"@", 1))...)...)
	if code != 1 || !strings.Contains(errOut, `"reason":"auth"`) {
		t.Fatalf("sync with a wrong password: exit %d, want 1 with reason auth", code)
	}
	logs.WriteString(errOut)

	spans := spansSent()
	// The checks below can only fail if there is something to search.
	if !strings.Contains(spans, "recond.tick") || !strings.Contains(spans, "recond.read") {
		t.Fatalf("the collector received no recond spans (%d bytes)", len(spans))
	}
	if !strings.Contains(string(metricsBody), "recond_source_info{revision=") {
		t.Fatalf("no source info in /metrics")
	}
	if !strings.Contains(logs.String(), base) {
		t.Errorf("logs never name the repository %s", base)
	}
	for _, secret := range []string{password, token, wrong} {
		for where, text := range map[string]string{"logs": logs.String(), "spans": spans, "metrics": string(metricsBody), "the status page": pages} {
			if strings.Contains(text, secret) {
				t.Errorf("%s contain the secret %q", where, secret)
			}
		}
	}
}

// A Secret's values from Git are never shown: a Secret is synced and then
// changed in Git, with random values, and every output of recond is
// searched for them: the log lines of run and sync (the "difference" lines
// included), `recond diff` in text and JSON, the exported spans and
// /metrics. The diff still shows that a key changed.
func TestSecretValuesNeverShown(t *testing.T) {
	random := func() string {
		b := make([]byte, 12)
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		return hex.EncodeToString(b)
	}
	first, second, third := random(), random(), random()
	secret := func(password, token string) string {
		return "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\nstringData:\n  password: " + password +
			"\ndata:\n  token: " + base64.StdEncoding.EncodeToString([]byte(token)) + "\n"
	}
	repo := testenv.NewRepo(t)
	repo.Commit("secret", map[string]string{"secret.yaml": secret(first, first+"-t"), "cm.yaml": cmYAML})
	spansSent := collectOTLP(t)
	args := clusterArgs(t, repo.URL())
	var out bytes.Buffer

	code, _, errOut := recond(t, append([]string{"sync"}, args...)...)
	if code != 0 {
		t.Fatalf("first sync: exit %d", code)
	}
	out.WriteString(errOut)
	repo.Commit("rotate", map[string]string{"secret.yaml": secret(second, second+"-t")})
	code, text, errOut := recond(t, append([]string{"diff"}, args...)...)
	if code != 1 || !strings.Contains(text, "Secret/creds") {
		t.Fatalf("diff: exit %d, output %q; want 1 and the Secret", code, text)
	}
	out.WriteString(text + errOut)
	code, js, errOut := recond(t, append([]string{"diff", "--output", "json"}, args...)...)
	if code != 1 || !strings.Contains(js, `"stringData.password"`) || !strings.Contains(js, `"data.token"`) {
		t.Fatalf("diff --output json: exit %d, output %q; want the changed keys", code, js)
	}
	out.WriteString(js + errOut)
	code, _, errOut = recond(t, append([]string{"sync"}, args...)...)
	if code != 0 || !strings.Contains(errOut, `"msg":"difference"`) || !strings.Contains(errOut, "Secret/creds") {
		t.Fatalf("second sync: exit %d; want a difference line for the Secret", code)
	}
	out.WriteString(errOut)

	// recond run while the Secret drifts in the cluster (a third value),
	// so that a healed difference is logged too.
	repo.Commit("rotate again", map[string]string{"secret.yaml": secret(third, third+"-t")})
	r := startRun(t, "1h", true, args...)
	metricsBody := get(t, "http://"+r.addr+"/metrics")
	// The status page shows the tick's changes (the Secret's drift among
	// them) and the managed objects.
	pages := get(t, "http://"+r.addr+"/") + get(t, "http://"+r.addr+"/ticks/1") +
		get(t, "http://"+r.addr+"/api/v1/status") + get(t, "http://"+r.addr+"/api/v1/ticks/1")
	r.stop()
	if !strings.Contains(pages, "creds") || !strings.Contains(pages, "stringData.password") {
		t.Fatalf("the status page shows neither the Secret nor its changed key:\n%s", pages)
	}
	out.WriteString(r.log.String())
	spans := spansSent()
	if !strings.Contains(spans, "recond.tick") {
		t.Fatalf("the collector received no recond spans (%d bytes)", len(spans))
	}
	if !strings.Contains(out.String(), `"msg":"difference"`) {
		t.Fatal("no difference line to search")
	}
	for _, v := range []string{first, second, third} {
		for _, value := range []string{v, v + "-t", base64.StdEncoding.EncodeToString([]byte(v)), base64.StdEncoding.EncodeToString([]byte(v + "-t"))} {
			for where, s := range map[string]string{"logs and diff output": out.String(), "spans": spans, "metrics": metricsBody, "the status page": pages} {
				if strings.Contains(s, value) {
					t.Errorf("%s contain the Secret value %q", where, value)
				}
			}
		}
	}
}

// collectOTLP points recond's OTLP/HTTP exporter at a collector that keeps
// every byte it receives, and returns what it received so far.
func collectOTLP(t *testing.T) func() string {
	t.Helper()
	var (
		mu   sync.Mutex
		otlp bytes.Buffer
	)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		otlp.Write(b)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(collector.Close)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "none")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		return otlp.String()
	}
}
