package reconcile_test

import (
	"context"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"recond.dev/recond/reconcile"
	"recond.dev/recond/reconcile/cluster"
	"recond.dev/recond/reconcile/watch"
)

// watched is a harness whose reconciler observes through a watch cache and
// runs its loop, with watch events asking for ticks as `recond run` wires
// them.
type watched struct {
	*harness
	mu      sync.Mutex
	results []*reconcile.Result
	stop    func()
}

func newWatched(t *testing.T, files map[string]string) *watched {
	t.Helper()
	h := newHarness(t)
	h.repo.Commit("app", files)
	kube, err := cluster.New(h.rest, h.ns)
	if err != nil {
		t.Fatal(err)
	}
	w := &watched{harness: h}
	cache, err := watch.New(context.Background(), dynamic.NewForConfigOrDie(h.rest), kube, h.ns, watch.Options{
		OnEvent: func(ev watch.Event) { h.rec.Noticed(ev.Kind, ev.Name, ev.Subresource, ev.At) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cache.Close)
	h.cfg.Live = cache
	h.reconciler()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		// An interval far beyond the test: every tick after the first is
		// asked for by the watch.
		h.rec.Run(ctx, time.Hour, time.Minute, func(r *reconcile.Result) {
			w.mu.Lock()
			w.results = append(w.results, r)
			w.mu.Unlock()
		})
		close(done)
	}()
	w.stop = func() { cancel(); <-done }
	t.Cleanup(w.stop)
	w.waitFor(t, "the first sync", func(rs []*reconcile.Result) bool {
		return len(rs) > 0 && rs[0].Outcome == reconcile.OutcomeApplied
	})
	return w
}

func (w *watched) ticks() []*reconcile.Result {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*reconcile.Result(nil), w.results...)
}

// waitFor waits until cond holds on the ticks so far, for up to a minute
// (a guard against a hang).
func (w *watched) waitFor(t *testing.T, what string, cond func([]*reconcile.Result) bool) []*reconcile.Result {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if rs := w.ticks(); cond(rs) {
			return rs
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: not within a minute; ticks: %d", what, len(w.ticks()))
	return nil
}

// scale sets the Deployment's replicas as `kubectl scale` does (another
// field manager, the scale subresource).
func (w *watched) scale(t *testing.T, n int) {
	t.Helper()
	patch := []byte(`{"spec":{"replicas":` + itoa(n) + `}}`)
	if _, err := w.dyn.Resource(gvrDeployment).Namespace(w.ns).Patch(context.Background(), "web", types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: "kubectl"}, "scale"); err != nil {
		t.Fatal(err)
	}
}

func itoa(n int) string {
	b := []byte{}
	for n >= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(append([]byte{byte('0' + n)}, b...))
}

// With an interval of an hour, drift by another manager is healed by a tick
// the watch asked for, whose result carries the trigger and the heal (from
// the event to the write); the write's own event asks for nothing more.
func TestWatchedDriftIsHealedWithoutWaitingForTheInterval(t *testing.T) {
	w := newWatched(t, app())
	before := len(w.ticks())
	w.scale(t, 5)
	rs := w.waitFor(t, "a heal", func(rs []*reconcile.Result) bool {
		for _, r := range rs[before:] {
			if len(r.Heals) > 0 {
				return true
			}
		}
		return false
	})
	var heal *reconcile.Result
	for _, r := range rs[before:] {
		if len(r.Heals) > 0 {
			heal = r
		}
	}
	if heal.Trigger != reconcile.TriggerWatch || heal.Outcome != reconcile.OutcomeApplied {
		t.Errorf("healing tick: trigger %s, outcome %s; want watch, applied", heal.Trigger, heal.Outcome)
	}
	if h := heal.Heals[0]; h.Kind != "Deployment" || h.Name != "web" || h.Latency <= 0 || h.Fight {
		t.Errorf("heal %+v", h)
	}
	t.Logf("healed in %s (from the watch event to the end of the write)", heal.Heals[0].Latency)
	if got := toInt(w.get(gvrDeployment, "web").Object["spec"].(map[string]any)["replicas"]); got != 2 {
		t.Errorf("replicas %d after the heal, want 2", got)
	}
	// recond's own write is not drift: no further ticks come.
	n := len(w.ticks())
	time.Sleep(time.Second)
	if extra := w.ticks()[n:]; len(extra) > 0 {
		t.Errorf("%d tick(s) after the heal (own write taken for drift?): first trigger %s", len(extra), extra[0].Trigger)
	}
}

// Another controller that keeps rewriting a field recond owns is a fight:
// it is counted, self-heal backs off for that object instead of spinning,
// and the tick says so.
//
// The other controller rewrites at least 40 times, 100 ms or more apart
// (about 4 s), and goes on until recond has counted a fight and backed off
// (a minute at most, a guard against a hang): the fight lasts until the
// events it is about, not for a time a busy machine could fill with fewer
// ticks.
func TestFightWithAnotherManagerBacksOff(t *testing.T) {
	w := newWatched(t, app())
	start := len(w.ticks())
	var rs []*reconcile.Result
	var fights, backingOff, rewrites int
	for guard := time.Now().Add(time.Minute); rewrites < 40 || fights == 0 || backingOff == 0; rewrites++ {
		if time.Now().After(guard) {
			t.Fatalf("no fight found in %d ticks after %d rewrites (fights %d, backing off %d)", len(rs), rewrites, fights, backingOff)
		}
		w.scale(t, 7)
		time.Sleep(100 * time.Millisecond)
		rs = w.ticks()[start:]
		fights, backingOff = 0, 0
		for _, r := range rs {
			for _, h := range r.Heals {
				if h.Fight {
					fights++
				}
			}
			backingOff += len(r.BackingOff)
		}
	}
	// Without a back-off every rewrite is undone at once (about 18 writes
	// in 40 rewrites here, one per debounced tick); with it, a handful: the
	// back-off doubles (2 s, 4 s, 8 s, ...), so even a fight that a busy
	// machine stretched to a minute stays under 10.
	var writes int
	for _, r := range rs {
		writes += r.Counts.Updated
	}
	if writes >= 10 {
		t.Errorf("%d self-heal writes in %d rewrites of fighting: no back-off", writes, rewrites)
	}
	t.Logf("%d rewrites: %d ticks, %d writes, %d fights, %d ticks backing off", rewrites, len(rs), writes, fights, backingOff)
}
