package main

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"

	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"recond.dev/recond/reconcile"
)

// maxSecretFile bounds a token or secret file: a secret is short; a large
// file is a mistake (a key pair, a log) that must not be sent as a token.
const maxSecretFile = 4096

// readSecretFile reads a token or secret file (surrounding whitespace, such
// as the newline `echo` adds, is not part of it).
func readSecretFile(flagName, path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flagName, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flagName, err)
	}
	if len(b) > maxSecretFile {
		return nil, fmt.Errorf("%s %s: longer than %d bytes", flagName, path, maxSecretFile)
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil, fmt.Errorf("%s %s: empty", flagName, path)
	}
	return b, nil
}

// syncAPI is POST /api/v1/sync: an authenticated request for a tick now.
// It answers at once with the id of the tick that will serve it; GET
// /api/v1/ticks/{id} tells when that tick ran and how it ended.
type syncAPI struct {
	digest  [sha256.Size]byte // of the token: compared in constant time, whatever the length
	request func(reconcile.Trigger, trace.SpanContext) uint64
	limit   *rate.Limiter
	log     *slog.Logger
}

func newSyncAPI(token []byte, request func(reconcile.Trigger, trace.SpanContext) uint64, log *slog.Logger) *syncAPI {
	// Authorized requests coalesce into one pending tick and are never
	// limited: a flood without the token must not lock out a CI job that
	// has it. The limit bounds what refused requests cost (their log lines).
	return &syncAPI{digest: sha256.Sum256(token), request: request, limit: rate.NewLimiter(20, 50), log: log}
}

// syncAnswer is the JSON of a 202 from POST /api/v1/sync.
type syncAnswer struct {
	Tick   uint64 `json:"tick"`
	Status string `json:"status"`
}

func (s *syncAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r.Header.Get("Authorization")) {
		if !s.limit.Allow() {
			w.Header().Set("Retry-After", "1")
			writeJSON(w, http.StatusTooManyRequests, map[string]string{"error": "too many refused requests"})
			return
		}
		s.log.Warn("sync request refused: no or wrong bearer token", "remote", remoteHost(r))
		w.Header().Set("WWW-Authenticate", `Bearer realm="recond"`)
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "a valid bearer token is required (--sync-token-file)"})
		return
	}
	// The body says nothing; do not read more than a little of it.
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1024))
	id := s.request(reconcile.TriggerManual, trace.SpanContextFromContext(r.Context()))
	s.log.Info("sync requested", "remote", remoteHost(r), "tick_id", id)
	writeJSON(w, http.StatusAccepted, syncAnswer{Tick: id, Status: fmt.Sprintf("/api/v1/ticks/%d", id)})
}

// authorized compares the bearer token with the configured one in constant
// time (over their digests, so that the length does not leak either).
func (s *syncAPI) authorized(header string) bool {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(token)))
	return subtle.ConstantTimeCompare(got[:], s.digest[:]) == 1
}

func remoteHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// requireToken serves h only to requests with the sync token (GET
// /api/v1/ticks/{id} when the status page is off: a tick's details are
// what the page would show).
func (s *syncAPI) requireToken(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.authorized(r.Header.Get("Authorization")) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="recond"`)
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "a valid bearer token is required (--sync-token-file)"})
			return
		}
		h.ServeHTTP(w, r)
	})
}

// leading serves h only while this process leads its instance: a standby's
// loop does not run, so a tick it promised would never come.
func leading(isLeader func() (bool, string), h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ok, holder := isLeader(); !ok {
			w.Header().Set("Retry-After", "5")
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "standby: the instance's leader is " + holder + "; ask it"})
			return
		}
		h.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

var fullSHA = regexp.MustCompile(`^[0-9a-f]{40}$`)

// follows tells which pushed refs concern recond following ref (--ref): a
// branch or tag name, a full ref, or "" (the remote HEAD, whose branch the
// webhook cannot know: every branch push asks for a tick, which costs one
// ls-remote when it was another branch). A commit SHA moves with no push.
func follows(ref string) func(string) bool {
	switch {
	case fullSHA.MatchString(ref):
		return func(string) bool { return false }
	case ref == "":
		return func(pushed string) bool { return strings.HasPrefix(pushed, "refs/heads/") }
	case strings.HasPrefix(ref, "refs/"):
		return func(pushed string) bool { return pushed == ref }
	}
	return func(pushed string) bool { return pushed == "refs/heads/"+ref || pushed == "refs/tags/"+ref }
}
