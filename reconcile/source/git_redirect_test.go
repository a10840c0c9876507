package source

import (
	"context"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gitRedirectURL carries the repository URL of TestGitRedirectToHTTP to
// the process that fetches it.
const gitRedirectURL = "_RECOND_TEST_GIT_REDIRECT_URL"

// TestGitRedirectToHTTP: a Git server over https that redirects to plain
// http is not followed, and the refusal is reason forbidden (a request
// recond will not make, which no retry changes), not unavailable. The
// fetch runs in a process of its own (this test binary again), which
// trusts the server's certificate (SSL_CERT_FILE).
func TestGitRedirectToHTTP(t *testing.T) {
	if url := os.Getenv(gitRedirectURL); url != "" {
		s := mustNew(t, Config{URL: url, CacheDir: t.TempDir()})
		_, err := s.Fetch(context.Background())
		var se *Error
		if !errors.As(err, &se) || se.Reason != ReasonForbidden || !strings.Contains(err.Error(), `changes scheme from "https" to "http"`) {
			t.Fatalf("Fetch = %v; want the redirect refused, reason forbidden", err)
		}
		return
	}
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the plain HTTP server was reached: %s", r.URL)
	}))
	defer plain.Close()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, plain.URL+r.URL.RequestURI(), http.StatusFound)
	}))
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestGitRedirectToHTTP$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "SSL_CERT_FILE="+ca, gitRedirectURL+"="+srv.URL+"/org/repo.git")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestGitRedirectToHTTP") {
		t.Fatalf("the fetch: %v\n%s", err, out)
	}
}
