package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// testSecret signs every test delivery.
var testSecret = []byte("It's a Secret to Everybody")

// testCase is one entry of testdata/cases.json: a provider's documented
// body, the headers it is sent with, and the answer expected. Header values
// may hold {{sha256=hmac}}, {{hmac}} or {{secret}}, filled in by sign.
type testCase struct {
	Name     string            `json:"name"`
	Body     string            `json:"body"`
	Headers  map[string]string `json:"headers"`
	Follows  string            `json:"follows"`
	Provider string            `json:"provider"`
	Status   int               `json:"status"`
	Result   string            `json:"result"`
	Message  string            `json:"message"`
}

func loadCases(t testing.TB) []testCase {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cs []testCase
	if err := json.Unmarshal(raw, &cs); err != nil {
		t.Fatal(err)
	}
	return cs
}

// acceptedCases returns the first accepted case of each provider.
func acceptedCases(t testing.TB) map[string]testCase {
	t.Helper()
	m := map[string]testCase{}
	for _, c := range loadCases(t) {
		if _, ok := m[c.Provider]; !ok && c.Result == Accepted {
			m[c.Provider] = c
		}
	}
	return m
}

func (c testCase) body(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", c.Body))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func hmacHex(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// header fills the placeholders of the case's headers for body signed with
// secret.
func (c testCase) header(secret, body []byte) http.Header {
	h := http.Header{}
	mac := hmacHex(secret, body)
	for k, v := range c.Headers {
		v = strings.ReplaceAll(v, "{{sha256=hmac}}", "sha256="+mac)
		v = strings.ReplaceAll(v, "{{hmac}}", mac)
		v = strings.ReplaceAll(v, "{{secret}}", string(secret))
		h.Set(k, v)
	}
	return h
}

// recorder stands for the loop: it counts the ticks asked for and the
// requests observed, and keeps the log.
type recorder struct {
	mu       sync.Mutex
	ticks    []string // provider of each Request call
	observed map[[2]string]int
	log      bytes.Buffer
}

func (r *recorder) config(follows string) Config {
	r.observed = map[[2]string]int{}
	return Config{
		Secret:  testSecret,
		Follows: func(ref string) bool { return ref == follows },
		Request: func(ctx context.Context, provider string) uint64 {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.ticks = append(r.ticks, provider)
			return uint64(len(r.ticks))
		},
		Observe: func(provider, result string) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.observed[[2]string{provider, result}]++
		},
		Log: slog.New(slog.NewTextHandler(lockedWriter{&r.mu, &r.log}, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
}

func (r *recorder) tickCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ticks)
}

func (r *recorder) logText() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.log.String()
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// serve starts a real HTTP server with the handler built from cfg.
func serve(t testing.TB, cfg Config) *httptest.Server {
	t.Helper()
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// post sends body with header to srv and decodes the answer.
func post(t testing.TB, srv *httptest.Server, header http.Header, body io.Reader) (int, Answer, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/hooks/git", body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	return do(t, srv.Client(), req)
}

func do(t testing.TB, c *http.Client, req *http.Request) (int, Answer, http.Header) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := c.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		t.Fatal(err)
	}
	var a Answer
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("answer %q is not JSON: %v", raw, err)
	}
	return resp.StatusCode, a, resp.Header
}

// clock is a settable clock for Config.Now.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// countingReader yields n bytes of '{' and counts how many were read.
type countingReader struct {
	mu   sync.Mutex
	n    int64
	read int64
}

func (r *countingReader) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.read >= r.n {
		return 0, io.EOF
	}
	if rest := r.n - r.read; int64(len(p)) > rest {
		p = p[:rest]
	}
	for i := range p {
		p[i] = '{'
	}
	r.read += int64(len(p))
	return len(p), nil
}

func (r *countingReader) bytesRead() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.read
}
