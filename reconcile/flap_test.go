package reconcile_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"recond.dev/recond/reconcile"
	"recond.dev/recond/reconcile/cluster"
	"recond.dev/recond/reconcile/source"
	"recond.dev/recond/reconcile/watch"
)

func cmFile(name, value string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\ndata:\n  v: \"" + value + "\"\n"
}

// recorded is a watch cache whose events are recorded, then handed to the
// reconciler as `recond run` hands them.
type recorded struct {
	mu  sync.Mutex
	got []watch.Event
}

func (r *recorded) add(ev watch.Event) {
	r.mu.Lock()
	r.got = append(r.got, ev)
	r.mu.Unlock()
}

// wait waits until an event ok accepts was recorded (a minute at most, a
// guard against a hang) and returns the events so far.
func (r *recorded) wait(t *testing.T, what string, ok func(watch.Event) bool) []watch.Event {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		r.mu.Lock()
		got := append([]watch.Event(nil), r.got...)
		r.mu.Unlock()
		for _, ev := range got {
			if ok(ev) {
				return got
			}
		}
	}
	t.Fatalf("no event %s within a minute", what)
	return nil
}

// watchedBy gives h a watch cache whose events are recorded in ev and
// handed to the reconciler.
func watchedBy(t *testing.T, h *harness, ev *recorded) {
	t.Helper()
	kube, err := cluster.New(h.rest, h.ns)
	if err != nil {
		t.Fatal(err)
	}
	cache, err := watch.New(context.Background(), dynamic.NewForConfigOrDie(h.rest), kube, h.ns, watch.Options{
		OnEvent: func(e watch.Event) {
			ev.add(e)
			h.rec.Noticed(e.Kind, e.Name, e.Subresource, e.At)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cache.Close)
	h.cfg.Live = cache
}

// editAs merge-patches the ConfigMap name's data.v as another field
// manager: drift.
func (h *harness) editAs(t *testing.T, manager, name, value string) {
	t.Helper()
	if _, err := h.dyn.Resource(gvrConfigMap).Namespace(h.ns).Patch(context.Background(), name, types.MergePatchType,
		[]byte(`{"data":{"v":"`+value+`"}}`), metav1.PatchOptions{FieldManager: manager}); err != nil {
		t.Fatal(err)
	}
}

// recond's own prune is not drift: its delete event asks for no tick, and
// a later revision that creates the object again heals nothing. Before, a
// tag flapping between two artifacts made a loop of ten ticks a second:
// each tick pruned what the other artifact had, each prune's event asked
// for the next tick (which resolved the tag again), and every tick counted
// the objects it created again as healed. Events are dispatched in order:
// once another manager's edit, made after the prune, has come through,
// the prune's event would have too.
func TestOwnPruneAsksForNoTickAndHealsNothing(t *testing.T) {
	h := newHarness(t)
	var ev recorded
	watchedBy(t, h, &ev)
	h.repo.Commit("both", map[string]string{"keep.yaml": cmFile("keep", "1"), "gone.yaml": cmFile("gone", "1")})
	h.mustTick(reconcile.OutcomeApplied)
	h.repo.Commit("one", map[string]string{"gone.yaml": ""})
	if r := h.mustTick(reconcile.OutcomeApplied); r.Counts.Pruned != 1 {
		t.Fatalf("pruned %d, want 1", r.Counts.Pruned)
	}
	h.editAs(t, "kubectl", "keep", "2")
	for _, e := range ev.wait(t, "for the edit", func(e watch.Event) bool { return e.Name == "keep" }) {
		if e.Name == "gone" {
			t.Errorf("recond's own prune came back as an event: %+v", e)
		}
	}

	h.repo.Commit("both again", map[string]string{"gone.yaml": cmFile("gone", "1")})
	r := h.mustTick(reconcile.OutcomeApplied)
	if r.Counts.Created != 1 {
		t.Errorf("created %d, want gone again", r.Counts.Created)
	}
	var healed []string
	for _, heal := range r.Heals {
		healed = append(healed, heal.Name)
	}
	if len(healed) != 1 || healed[0] != "keep" {
		t.Errorf("healed %v, want the edited keep only (gone was pruned by recond, not deleted by someone else)", healed)
	}
}

// flipping is a source whose branch moves to the other of two commits at
// every fetch: a tag flapping between two digests.
type flipping struct {
	reconcile.Source
	h       *harness
	commits [2]string
	fetches atomic.Int32
}

func (f *flipping) Fetch(ctx context.Context) (source.Revision, error) {
	n := f.fetches.Add(1)
	f.h.repo.SetBranch("main", f.commits[(n+1)%2])
	return f.Source.Fetch(ctx)
}

// A source that moved is fetched again once per interval at most, unless
// a tick is asked for by hand (or a webhook, or the interval): a tick that
// a watch event asks for within the interval heals drift against the
// revision the last fetch found, and neither fetches nor changes revision.
// Before, every such tick fetched, and a flapping source changed the
// revision at each one.
func TestMovedSourceIsPacedByTheInterval(t *testing.T) {
	h := newHarness(t)
	var ev recorded
	watchedBy(t, h, &ev)
	a := h.repo.Commit("a", map[string]string{"keep.yaml": cmFile("keep", "1"), "a.yaml": cmFile("a", "1")})
	b := h.repo.Commit("b", map[string]string{"a.yaml": "", "b.yaml": cmFile("b", "1")})
	src := &flipping{h: h, commits: [2]string{a, b}}
	h.wrap = func(s reconcile.Source) reconcile.Source { src.Source = s; return src }
	rec := h.reconciler()
	var (
		mu      sync.Mutex
		results []*reconcile.Result
	)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		rec.Run(ctx, time.Hour, time.Minute, func(r *reconcile.Result) {
			mu.Lock()
			results = append(results, r)
			mu.Unlock()
		})
	}()
	t.Cleanup(func() { cancel(); <-stopped })
	waitTicks := func(what string, ok func([]*reconcile.Result) bool) []*reconcile.Result {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			mu.Lock()
			rs := append([]*reconcile.Result(nil), results...)
			mu.Unlock()
			if ok(rs) {
				return rs
			}
		}
		t.Fatalf("%s: not within a minute", what)
		return nil
	}
	waitTicks("the first sync at a", func(rs []*reconcile.Result) bool { return len(rs) == 1 && rs[0].Revision == a })
	rec.Request(reconcile.TriggerManual, trace.SpanContext{})
	rs := waitTicks("a manual tick at b", func(rs []*reconcile.Result) bool { return len(rs) == 2 })
	if moved := rs[1]; moved.Revision != b || moved.Counts.Pruned != 1 || moved.Counts.Created != 1 {
		t.Fatalf("manual tick: revision %s, created %d, pruned %d; want b, 1, 1", moved.Revision, moved.Counts.Created, moved.Counts.Pruned)
	}

	h.editAs(t, "kubectl", "keep", "2")
	rs = waitTicks("a heal", func(rs []*reconcile.Result) bool {
		return len(rs) > 2 && len(rs[len(rs)-1].Heals) > 0
	})
	for _, r := range rs[2:] {
		if r.Trigger != reconcile.TriggerWatch || r.Revision != b || r.Counts.Created != 0 || r.Counts.Pruned != 0 || r.Fetched {
			t.Errorf("tick %d (%s): revision %s, created %d, pruned %d, fetched %t; want the revision b kept, nothing created or pruned",
				r.ID, r.Trigger, r.Revision, r.Counts.Created, r.Counts.Pruned, r.Fetched)
		}
	}
	if n := src.fetches.Load(); n != 2 {
		t.Errorf("%d fetches, want 2 (the first tick's, the manual one's)", n)
	}

	// Asked for by hand, the source is fetched again.
	rec.Request(reconcile.TriggerManual, trace.SpanContext{})
	rs = waitTicks("a manual tick", func(rs []*reconcile.Result) bool {
		return rs[len(rs)-1].Trigger == reconcile.TriggerManual && len(rs) > 3
	})
	if last := rs[len(rs)-1]; last.Revision != a || src.fetches.Load() != 3 {
		t.Errorf("manual tick at %s after %d fetches, want a after 3", last.Revision, src.fetches.Load())
	}
}
