package source

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"recond.dev/recond/internal/redact/redacttest"
)

// A token in the repository URL's query ("?private_token=", as GitLab
// accepts) is dropped from the display URL, and from every error a fetch
// returns although go-git quotes the URL it requested.
func TestURLQueryNeverDisplayed(t *testing.T) {
	const token = "glpat-q7Xz9s3cr3tT0k3n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "nope", http.StatusInternalServerError)
	}))
	defer srv.Close()
	// A closed port: go-git's error quotes the URL it asked for.
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	for _, tc := range []struct{ url, display string }{
		{srv.URL + "/org/shop.git?private_token=" + token, srv.URL + "/org/shop.git"},
		{srv.URL + "/org/shop.git?a=1&private_token=" + token + "#" + token, srv.URL + "/org/shop.git"},
		{closed.URL + "/org/shop.git?private_token=" + token, closed.URL + "/org/shop.git"},
		{closed.URL + "/org/shop.git?private_token=" + token + "%2Bx", closed.URL + "/org/shop.git"},
		{"https://deploy:" + token + "@gitlab.example.com/org/shop.git?private_token=" + token, "https://gitlab.example.com/org/shop.git"},
		{"ssh://git@gitlab.example.com/org/shop.git?private_token=" + token, "ssh://git@gitlab.example.com/org/shop.git"},
	} {
		s, err := New(Config{URL: tc.url, CacheDir: t.TempDir(), InsecureSkipHostKeyCheck: strings.HasPrefix(tc.url, "ssh:")})
		if err != nil {
			t.Fatalf("New(%s): %v", tc.url, err)
		}
		if got := s.DisplayURL(); got != tc.display {
			t.Errorf("DisplayURL() = %q, want %q", got, tc.display)
		}
		if !strings.HasPrefix(tc.url, "http://") {
			continue
		}
		_, err = s.Fetch(context.Background())
		if err == nil {
			t.Fatalf("Fetch(%s) succeeded", tc.url)
		}
		if !strings.Contains(err.Error(), tc.display) {
			t.Errorf("Fetch error %q does not name the repository", err)
		}
		if strings.Contains(redacttest.Renderings(err), token) {
			t.Errorf("Fetch error quotes the token: %v", err)
		}
	}
}
