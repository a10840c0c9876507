package reconcile_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"recond.dev/recond/reconcile"
)

// configMaps is n ConfigMaps cm-<i> with data.v = value, one file each.
func configMaps(n int, value string) map[string]string {
	files := map[string]string{}
	for i := range n {
		files[fmt.Sprintf("cm-%02d.yaml", i)] = fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%02d\ndata:\n  v: %s\n", i, value)
	}
	return files
}

// A process that stops holding the instance's Lease in the middle of a
// wave (Config.MayWrite refuses from then on) writes nothing more: the
// write in flight ends, no other object and no inventory is written,
// nothing is pruned, and the tick fails in apply with reason conflict.
// Holding the Lease again, the next tick finishes the job.
func TestLostLeaseStopsTheApplyAtOnce(t *testing.T) {
	h := newHarness(t)
	h.cfg.ApplyConcurrency = 1
	files := configMaps(20, "one")
	files["gone.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: gone\ndata:\n  v: one\n"
	h.repo.Commit("one", files)
	h.mustTick(reconcile.OutcomeApplied)

	files = configMaps(20, "two")
	files["gone.yaml"] = ""
	h.repo.Commit("two", files)
	var (
		lost        atomic.Bool
		writes      atomic.Int32 // object writes (not dry runs, not the inventory)
		afterLoss   atomic.Int32 // any write request made once the Lease was lost
		errAnother  = errors.New("lease recond-leader-recond is held by b")
		lostAtWrite = int32(3)
	)
	cfg := rest.CopyConfig(cp.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			write := r.Method != http.MethodGet && !strings.Contains(r.URL.RawQuery, "dryRun")
			if write && lost.Load() {
				afterLoss.Add(1)
			}
			if write && !strings.Contains(r.URL.Path, "recond-inventory") && writes.Add(1) == lostAtWrite {
				// Another process takes the Lease while this write is on
				// the wire.
				lost.Store(true)
			}
			return rt.RoundTrip(r)
		})
	})
	h.rest, h.rec = cfg, nil
	h.cfg.MayWrite = func() error {
		if lost.Load() {
			return errAnother
		}
		return nil
	}
	r := h.tick()
	f := r.Failure()
	if f == nil || f.Phase != reconcile.PhaseApply || f.Reason != reconcile.ReasonConflict || !errors.Is(f, errAnother) ||
		!strings.Contains(f.Error(), "does not hold the instance's Lease") {
		t.Fatalf("tick failure %v, want apply (conflict) saying the Lease is not held", f)
	}
	if n := afterLoss.Load(); n != 0 {
		t.Errorf("%d write request(s) made after the Lease was lost", n)
	}
	if len(r.Ops) != int(lostAtWrite) {
		t.Errorf("ops %v, want the %d writes made before the loss", r.Ops, lostAtWrite)
	}
	for _, op := range r.Ops {
		if op.Err != nil || op.Action == "delete" {
			t.Errorf("op %+v: want completed updates only", op)
		}
	}
	if h.get(gvrConfigMap, "gone") == nil {
		t.Error("pruned although the Lease was lost")
	}
	if v, _, _ := unstructured.NestedString(h.get(gvrConfigMap, "cm-19").Object, "data", "v"); v != "one" {
		t.Errorf("cm-19 = %q: written after the Lease was lost", v)
	}

	// Holding the Lease again: the rest is written, gone is pruned.
	lost.Store(false)
	h.cfg.MayWrite, h.rest, h.rec = nil, cp.Config, nil
	r = h.mustTick(reconcile.OutcomeApplied)
	if r.Counts.Updated != 20-int(lostAtWrite) || r.Counts.Pruned != 1 {
		t.Errorf("after the Lease came back: counts %+v, want %d updated and 1 pruned", r.Counts, 20-lostAtWrite)
	}
}

// A prune carries what the tick observed as its precondition: an object
// another writer changed between the observe and the delete (here,
// relabelled for another instance while the DELETE is on its way) is not
// deleted. The tick does not fail; it defers the prune, and the next
// tick, seeing the object no longer recond's, leaves it alone.
func TestPruneOfAnObjectChangedSinceObservedIsDeferred(t *testing.T) {
	h := newHarness(t)
	files := configMaps(2, "one")
	files["given.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: given\ndata:\n  v: one\n"
	h.repo.Commit("one", files)
	h.mustTick(reconcile.OutcomeApplied)

	files["given.yaml"] = ""
	h.repo.Commit("two", files)
	var relabelled atomic.Bool
	cfg := rest.CopyConfig(cp.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodDelete && strings.HasSuffix(r.URL.Path, "/configmaps/given") && !relabelled.Swap(true) {
				h.patchAs(t, gvrConfigMap, "given", `{"metadata":{"labels":{"`+reconcile.LabelInstance+`":"other"}}}`)
			}
			return rt.RoundTrip(r)
		})
	})
	h.rest, h.rec = cfg, nil
	r := h.tick()
	if f := r.Failure(); f != nil {
		t.Fatalf("tick failed: %v", f)
	}
	if !relabelled.Load() {
		t.Fatal("no prune of given was sent")
	}
	if r.Counts.Pruned != 0 || r.Counts.Deferred != 1 || len(r.Deferred) != 1 || r.Deferred[0].Name != "given" {
		t.Fatalf("counts %+v, deferred %v: want the prune of given deferred", r.Counts, r.Deferred)
	}
	live := h.get(gvrConfigMap, "given")
	if live == nil {
		t.Fatal("given was pruned although another instance took it after the tick observed it")
	}
	if got := live.GetLabels()[reconcile.LabelInstance]; got != "other" {
		t.Fatalf("given's instance label %q, want other", got)
	}

	r = h.tick()
	if f := r.Failure(); f != nil || r.Counts.Pruned != 0 || r.Counts.Deferred != 0 {
		t.Fatalf("the next tick: failure %v, counts %+v; want given left to its new owner", f, r.Counts)
	}
	if h.get(gvrConfigMap, "given") == nil {
		t.Fatal("given was pruned by the next tick")
	}
}
