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
