package watch

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"recond.dev/recond/internal/testenv"
)

// TestBookmarkOnlyWatchIsCaught: a watch stream that loses every event but
// still passes bookmarks looks alive (StaleAfter, ten minutes here, never
// fires), and hides drift from List until the periodic relist (30 to 45
// minutes). The check (a LIST every CheckEvery) finds the store behind:
// the informer is restarted with a fresh LIST, List shows the truth, and
// the changes the watch lost are handed to OnEvent, as a watch would have.
func TestBookmarkOnlyWatchIsCaught(t *testing.T) {
	const checkEvery = 2 * time.Second
	var logs testenv.SyncBuffer
	var ev events
	e, p := proxiedEnv(t, Options{StaleAfter: 10 * time.Minute, CheckEvery: checkEvery, OnEvent: ev.add,
		Log: slog.New(slog.NewTextHandler(&logs, nil))})
	e.applyOwned("a", "b")

	drop := p.Add(testenv.Fault{Match: testenv.Match{Path: "/configmaps", Watch: testenv.WatchOnly}, Drop: true})
	want := e.driftAB()
	drop.WaitHits(t, 2, time.Minute) // both events lost
	lost := time.Now()
	if items, err := e.cache.List(ctxT(t, 10*time.Second), gvkConfigMap, selector); err != nil || len(items) != 2 {
		t.Fatalf("List right after the events were lost = %d objects, %v; want the 2 of before (are they lost?)", len(items), err)
	}

	got := waitEvent(t, &ev, "for b's deletion", func(e Event) bool { return e.Name == "b" })
	found := time.Since(lost)
	for len(got) < 2 {
		got = waitEvent(t, &ev, "for a's update", func(e Event) bool { return e.Name == "a" })
	}
	sortEvents := cmp.Transformer("sort", func(in []Event) []Event {
		out := append([]Event(nil), in...)
		if len(out) == 2 && out[0].Name > out[1].Name {
			out[0], out[1] = out[1], out[0]
		}
		return out
	})
	if d := cmp.Diff(want, got, ignoreAt, sortEvents); d != "" {
		t.Errorf("events handed on (-want +got):\n%s", d)
	}
	e.checkListIsLIST("after the check")
	s := e.cache.Stats()
	if s.Restarts != 1 || s.Checks < 1 {
		t.Errorf("Restarts = %d, Checks = %d; want 1 and at least 1", s.Restarts, s.Checks)
	}
	if l := logs.String(); !strings.Contains(l, "behind the API server") {
		t.Errorf("no log line says the cache was behind; log:\n%s", l)
	}
	// CheckEvery plus its jitter, and the grace of a difference for each of
	// the two LISTs: the bound, measured.
	t.Logf("lost events found %s after the loss (check every %s, at most %s later)", found.Round(time.Millisecond), checkEvery,
		time.Duration((1+CheckJitter)*float64(checkEvery))+2*checkGrace)
}

// TestCheckOfAHealthyWatchRestartsNothing: while events flow (recond's
// writes and another manager's, some within a moment of a check's LIST),
// checks find the store as the API server has it and restart nothing.
func TestCheckOfAHealthyWatchRestartsNothing(t *testing.T) {
	var ev events
	e, _ := proxiedEnv(t, Options{CheckEvery: time.Second, OnEvent: ev.add})
	e.applyConfigMap("recond", "a", true, map[string]any{"k": "0"})
	e.waitListEqual(gvkConfigMap, gvrConfigMap)
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
			manager := "recond"
			if i%2 == 1 {
				manager = "kubectl"
			}
			_, err := e.dyn.Resource(gvrConfigMap).Namespace(e.ns).Patch(context.Background(), "a", "application/merge-patch+json",
				[]byte(`{"data":{"k":"`+itoa(i)+`"}}`), metav1.PatchOptions{FieldManager: manager})
			if err != nil {
				t.Error(err)
				return
			}
		}
	}()
	e.waitStats("three checks", func(s Stats) bool { return s.Checks >= 3 })
	close(done)
	<-stopped
	if s := e.cache.Stats(); s.Restarts != 0 {
		t.Errorf("%d restarts in %d checks of a healthy watch, want none", s.Restarts, s.Checks)
	}
}

// TestFailingWatchIsNotVouchedFor: while an informer's list or watch
// requests fail (the API server unreachable), the cache does not vouch
// for its store: Generation says so (no quiet tick) and List asks the API
// server, whose error it returns, instead of answering what the store held
// when the watch broke. Once the requests succeed again, List answers from
// the store, without a request.
func TestFailingWatchIsNotVouchedFor(t *testing.T) {
	e, p := proxiedEnv(t, Options{})
	e.applyOwned("a")
	if _, ok := e.cache.Generation(); !ok {
		t.Fatal("Generation not ok with a synced, fresh informer")
	}

	p.SetDown(true)
	e.waitStats("the watch's failure", func(s Stats) bool { return s.Kinds[0].Err != nil })
	if _, ok := e.cache.Generation(); ok {
		t.Error("Generation ok while the informer's requests fail")
	}
	items, err := e.cache.List(ctxT(t, 20*time.Second), gvkConfigMap, selector)
	if err == nil {
		t.Errorf("List while the API server is unreachable = %d objects and no error, want the API server's error", len(items))
	} else if !strings.Contains(err.Error(), "watch failed") {
		t.Errorf("List error %q does not say the watch failed", err)
	}
	if u, err := e.cache.Get(ctxT(t, 20*time.Second), gvkConfigMap, "a"); err == nil {
		t.Errorf("Get while the API server is unreachable = %v and no error, want the API server's error", u)
	}

	p.SetDown(false)
	e.waitStats("the watch back", func(s Stats) bool { return s.Kinds[0].Err == nil })
	if _, ok := e.cache.Generation(); !ok {
		t.Error("Generation not ok once the watch is back")
	}
	n := e.reqs.len()
	if items, err := e.cache.List(ctxT(t, 20*time.Second), gvkConfigMap, selector); err != nil || len(items) != 1 {
		t.Errorf("List once back = %d objects, %v; want 1", len(items), err)
	}
	for _, r := range e.reqs.since(n) {
		if !strings.Contains(r, "watch=true") {
			t.Errorf("List once back made a request: %s", r)
		}
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}
