package oci

import (
	"context"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRedirectToHTTPForbidden: a registry served over TLS that redirects
// to plain HTTP is not followed, and the refusal is reason forbidden (a
// request recond will not make, which no retry changes), not unavailable.
func TestRedirectToHTTPForbidden(t *testing.T) {
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the plain HTTP server was reached: %s", r.URL)
	}))
	defer plain.Close()
	reg := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, plain.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer reg.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: reg.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	ref, err := ParseURL("oci://" + strings.TrimPrefix(reg.URL, "https://") + "/apps/a")
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(ref, Options{CAFile: ca})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Resolve(context.Background(), "latest")
	var e *Error
	if !errors.As(Classify(err), &e) || e.Reason != ReasonForbidden || !strings.Contains(err.Error(), "refused a redirect from https to http://") {
		t.Fatalf("Resolve = %v; want a refused redirect, reason forbidden", err)
	}
}
