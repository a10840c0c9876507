package main

import (
	"bytes"
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
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "none")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")

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

	mu.Lock()
	spans := otlp.String()
	mu.Unlock()
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
		for where, text := range map[string]string{"logs": logs.String(), "spans": spans, "metrics": string(metricsBody)} {
			if strings.Contains(text, secret) {
				t.Errorf("%s contain the secret %q", where, secret)
			}
		}
	}
}
