package main

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"recond.dev/recond/reconcile"
)

// TestHealthzFailsWhenNoTickStarts: /healthz fails once the running loop
// has started no tick for 3 intervals (or, with a longer --tick-timeout,
// the longest a tick can take and an interval), so that the kubelet
// restarts a wedged process; it does not fail for a standby, for a tick
// that is slow but within its bound, or before the loop starts. The
// progress is the Reconciler's (reconcile's TestWedgedLoopStartsNoMoreTicks
// wedges a real loop).
func TestHealthzFailsWhenNoTickStarts(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name            string
		interval, tmout time.Duration
		loopAgo         time.Duration // 0: the loop does not run
		progress        reconcile.Progress
		want            int
		says            string
	}{
		{"standby", time.Second, time.Second, 0, reconcile.Progress{}, 200, ""},
		{"loop just started", time.Second, time.Second, time.Second, reconcile.Progress{}, 200, ""},
		{"loop started, no tick for long", time.Second, time.Second, time.Minute, reconcile.Progress{}, 503, "started no tick for 1m0s (limit 4s)"},
		{"ticking", 10 * time.Second, 10 * time.Second, time.Hour,
			reconcile.Progress{Started: 7, Finished: 6, Running: true, StartedAt: now.Add(-25 * time.Second)}, 200, ""},
		{"three intervals without a start", 10 * time.Second, 10 * time.Second, time.Hour,
			reconcile.Progress{Started: 7, Finished: 5, Running: true, StartedAt: now.Add(-31 * time.Second), Strays: 2}, 503,
			"started no tick for 31s (limit 30s); 2 phase(s) of abandoned ticks still running; tick 7 still running"},
		{"long tick timeout, within", 10 * time.Second, 2 * time.Minute, time.Hour,
			reconcile.Progress{Started: 3, Running: true, StartedAt: now.Add(-2 * time.Minute)}, 200, ""},
		{"long tick timeout, past", 10 * time.Second, 2 * time.Minute, time.Hour,
			reconcile.Progress{Started: 3, Running: true, StartedAt: now.Add(-3 * time.Minute)}, 503, "(limit 2m12s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &app{opts: &options{interval: tc.interval, tickTimeout: tc.tmout}, log: slog.New(slog.DiscardHandler), reg: prometheus.NewRegistry()}
			a.progress = func() reconcile.Progress { return tc.progress }
			if tc.loopAgo > 0 {
				a.loopSince.Store(now.Add(-tc.loopAgo).UnixNano())
			}
			// The verdict at the very now the cases are written against:
			// the time the test takes to get here moves nothing.
			msg := a.wedged(now)
			if got := map[bool]int{true: 503, false: 200}[msg != ""]; got != tc.want || !strings.Contains(msg, tc.says) {
				t.Errorf("/healthz would be %d %q, want %d with %q", got, msg, tc.want, tc.says)
			}
		})
	}
	// The handler answers the verdict at its own now: cases hours from
	// their limits, which no delay moves.
	for _, tc := range []struct {
		name    string
		loopAgo time.Duration
		want    int
		says    string
	}{
		{"standby", 0, 200, "ok"},
		{"no tick for hours", 5 * time.Hour, 503, "the loop has started no tick for"},
	} {
		t.Run("handler, "+tc.name, func(t *testing.T) {
			a := &app{opts: &options{interval: time.Second, tickTimeout: time.Second}, log: slog.New(slog.DiscardHandler), reg: prometheus.NewRegistry()}
			a.progress = func() reconcile.Progress { return reconcile.Progress{} }
			if tc.loopAgo > 0 {
				a.loopSince.Store(time.Now().Add(-tc.loopAgo).UnixNano())
			}
			rec := httptest.NewRecorder()
			a.handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
			if rec.Code != tc.want || !strings.Contains(rec.Body.String(), tc.says) {
				t.Errorf("/healthz = %d %q, want %d with %q", rec.Code, rec.Body.String(), tc.want, tc.says)
			}
		})
	}
}
