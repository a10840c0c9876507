package watch

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"recond.dev/recond/internal/testenv"
)

// TestStalledWatchRestarts: a watch whose stream stays open but delivers
// nothing (no event, no bookmark) hides drift from List and Get; once the
// informer has seen nothing for StaleAfter, the one read that notices it
// restarts the informer (a LIST, not a streaming list: the new watch is
// stalled too) and returns the truth, drift made during the stall included.
func TestStalledWatchRestarts(t *testing.T) {
	const staleAfter = 3 * time.Second
	tests := []struct {
		name string
		read func(e *env) (string, error) // the value of "a"'s key k
	}{
		{"List", func(e *env) (string, error) {
			items, err := e.cache.List(ctxT(e.t, 20*time.Second), gvkConfigMap, selector)
			for _, u := range items {
				if u.GetName() == "a" {
					return u.Object["data"].(map[string]any)["k"].(string), err
				}
			}
			return "", err
		}},
		{"Get", func(e *env) (string, error) {
			u, err := e.cache.Get(ctxT(e.t, 20*time.Second), gvkConfigMap, "a")
			if u == nil || err != nil {
				return "", err
			}
			return u.Object["data"].(map[string]any)["k"].(string), nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs testenv.SyncBuffer
			var ev events
			e, p := proxiedEnv(t, Options{StaleAfter: staleAfter, OnEvent: ev.add, Log: slog.New(slog.NewTextHandler(&logs, nil))})
			e.t = t
			e.applyOwned("a", "b")
			// A fresh event, so that the stall starts well within StaleAfter.
			e.applyOwned("c")
			lists := e.cache.Stats().Kinds[0].Lists

			stall := p.Add(testenv.Fault{Match: testenv.Match{Path: "/configmaps", Watch: testenv.WatchOnly}, Stall: true})
			want := e.driftAB()
			stall.WaitHits(t, 2, 10*time.Second) // both events swallowed
			if age := e.cache.Stats().Kinds[0].Age; age >= staleAfter {
				t.Fatalf("informer already %v old when the stall began; the test cannot tell a stall from staleness", age)
			}
			// The stall is real: within StaleAfter the cache still shows
			// what was.
			if got, err := tt.read(e); err != nil || got != "1" {
				t.Fatalf("read within StaleAfter = %q, %v; want the stale \"1\" (is the watch stalled?)", got, err)
			}
			if got := ev.list(); len(got) != 0 {
				t.Fatalf("events during the stall = %+v, want none (is the watch stalled?)", got)
			}
			n := e.reqs.len()
			e.waitAge(staleAfter)
			start := time.Now()
			got, err := tt.read(e)
			if err != nil {
				t.Fatal(err)
			}
			took := time.Since(start)
			if got != "2" {
				t.Errorf("read after StaleAfter = %q, want the drifted \"2\"", got)
			}
			if tt.name == "List" {
				e.checkListIsLIST("after the restart")
			}
			s := e.cache.Stats()
			if s.Restarts != 1 || s.Kinds[0].Restarts != 1 || s.Kinds[0].Lists != lists+1 {
				t.Errorf("Restarts = %d (kind %d), lists = %d; want 1, 1, %d", s.Restarts, s.Kinds[0].Restarts, s.Kinds[0].Lists, lists+1)
			}
			if e.reqs.count(n, "GET", "sendInitialEvents=true") != 0 || !slicesContainsList(e.reqs.since(n)) {
				t.Errorf("restart requests = %v, want a plain LIST and no streaming list", e.reqs.since(n))
			}
			if l := logs.String(); !strings.Contains(l, "level=WARN msg=\"watch stalled") || !strings.Contains(l, "Kind=ConfigMap") {
				t.Errorf("no warning with the kind for the restart; log:\n%s", l)
			}
			// What the stalled watch did not deliver is handed to OnEvent,
			// as the watch would have.
			deadline := time.Now().Add(3 * time.Second)
			for len(ev.list()) < len(want) && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(100 * time.Millisecond)
			if d := cmp.Diff(want, ev.list(), ignoreAt); d != "" {
				t.Errorf("events after the restart (-want +got):\n%s", d)
			}
			t.Logf("stall noticed after %v; the read that restarted it took %v", staleAfter, took.Round(time.Millisecond))
		})
	}
}

// slicesContainsList reports whether reqs hold a LIST (not a watch).
func slicesContainsList(reqs []string) bool {
	for _, r := range reqs {
		if strings.HasPrefix(r, "GET ") && strings.Contains(r, "/configmaps?") && !strings.Contains(r, "watch=true") {
			return true
		}
	}
	return false
}

// TestFreshInformerNotRestarted: reads of an informer that has seen
// something within StaleAfter make no request and restart nothing, whether
// it is quiet (reads within StaleAfter of its sync) or busy (events keep it
// fresh for several StaleAfter).
func TestFreshInformerNotRestarted(t *testing.T) {
	const staleAfter = 2 * time.Second
	tests := []struct {
		name string
		// The cache is read for d (quiet: until the informer is d old);
		// every is how often it writes (0: never).
		d     time.Duration
		every time.Duration
	}{
		{"quiet, within StaleAfter", staleAfter / 2, 0},
		{"busy, for 3 StaleAfter", 3 * staleAfter, 300 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, _ := proxiedEnv(t, Options{StaleAfter: staleAfter})
			e.t = t
			e.applyConfigMap("recond", "a", true, map[string]any{"k": "0"})
			e.waitListEqual(gvkConfigMap, gvrConfigMap)
			n := e.reqs.len()
			start := time.Now()
			lastWrite := start
			more := func() bool {
				if tt.every == 0 {
					// Quiet: read while the informer's age (since its
					// last event) is well within StaleAfter, not for a time
					// from start, which a busy machine may begin late.
					return e.cache.Stats().Kinds[0].Age < tt.d
				}
				return time.Since(start) < tt.d
			}
			for i := 1; i == 1 || more(); i++ {
				if tt.every > 0 && time.Since(lastWrite) >= tt.every {
					// Another manager's write, as an event.
					e.patch(gvrConfigMap, "a", "kubectl", `{"data":{"k":"`+time.Now().Format("150405.000")+`"}}`)
					lastWrite = time.Now()
				}
				if _, err := e.cache.List(ctxT(t, 10*time.Second), gvkConfigMap, selector); err != nil {
					t.Fatal(err)
				}
				if _, err := e.cache.Get(ctxT(t, 10*time.Second), gvkConfigMap, "a"); err != nil {
					t.Fatal(err)
				}
				time.Sleep(50 * time.Millisecond)
			}
			var other []string
			for _, r := range e.reqs.since(n) {
				if !strings.Contains(r, "watch=true") || strings.Contains(r, "sendInitialEvents=true") {
					other = append(other, r)
				}
			}
			if s := e.cache.Stats(); s.Restarts != 0 || len(other) != 0 {
				t.Errorf("after %v of reads: %d restarts, requests %v; want none", tt.d, s.Restarts, other)
			}
		})
	}
}
