package reconcile_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/reconcile"
	"recond.dev/recond/reconcile/cluster"
	"recond.dev/recond/reconcile/health"
	"recond.dev/recond/reconcile/watch"
)

// countingCache is the watch cache, counting the Lists a tick makes of
// the objects (not of the inventory, one ConfigMap read at every tick).
type countingCache struct {
	*watch.Cache
	lists atomic.Int64
}

func (c *countingCache) List(ctx context.Context, gvk schema.GroupVersionKind, selector string) ([]unstructured.Unstructured, error) {
	if !strings.Contains(selector, reconcile.LabelInventory) {
		c.lists.Add(1)
	}
	return c.Cache.List(ctx, gvk, selector)
}

const quietConfigMap = `apiVersion: v1
kind: ConfigMap
metadata:
  name: c
data:
  k: v
`

// A converged tick at an unchanged revision, with nothing changed in what
// the watches see, is quiet: it lists nothing and reuses the last full
// tick's findings. A tick asked for by hand is never quiet; a change by
// another manager, a new revision and a progress deadline that passes
// are each seen by the next tick (the first two by a full one).
func TestQuietTick(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit("app", map[string]string{"cm.yaml": quietConfigMap, "web.yaml": testenv.DeploymentYAML})
	kube, err := cluster.New(h.rest, h.ns)
	if err != nil {
		t.Fatal(err)
	}
	wc, err := watch.New(context.Background(), dynamic.NewForConfigOrDie(h.rest), kube, h.ns, watch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wc.Close)
	cache := &countingCache{Cache: wc}
	h.cfg.Live = cache
	h.cfg.HealthTimeout = 4 * time.Second
	rec := h.reconciler()
	tick := func(why reconcile.Trigger) (*reconcile.Result, int64) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		before := cache.lists.Load()
		r := rec.TickFor(ctx, why)
		if f := r.Failure(); f != nil {
			t.Fatalf("tick failed: %v", f)
		}
		return r, cache.lists.Load() - before
	}
	// untilQuiet ticks (the watch events of the tick's own writes move the
	// cache's generation once more) until a tick is quiet.
	untilQuiet := func(what string) *reconcile.Result {
		t.Helper()
		for range 20 {
			r, lists := tick(reconcile.TriggerInterval)
			if r.Quiet {
				if lists != 0 {
					t.Errorf("%s: a quiet tick listed %d time(s)", what, lists)
				}
				if r.Outcome != reconcile.OutcomeConverged || r.Counts.Desired != 2 || r.Counts.Managed != 2 || r.Health == nil {
					t.Errorf("%s: quiet tick: outcome %s, %d desired, %d managed, health %v", what, r.Outcome, r.Counts.Desired, r.Counts.Managed, r.Health)
				}
				return r
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("%s: no quiet tick in 20", what)
		return nil
	}
	if r, _ := tick(reconcile.TriggerInterval); r.Outcome != reconcile.OutcomeApplied || r.Quiet {
		t.Fatalf("first tick: %s, quiet %t", r.Outcome, r.Quiet)
	}
	untilQuiet("after the first sync")

	if r, lists := tick(reconcile.TriggerManual); r.Quiet || lists == 0 {
		t.Errorf("a manual tick was quiet (%t) or listed nothing (%d)", r.Quiet, lists)
	}
	untilQuiet("after a manual tick")

	// Another manager changes the ConfigMap: once the watch has seen it,
	// the next tick is a full one and heals it.
	gen, _ := wc.Generation()
	if _, err := h.dyn.Resource(gvrConfigMap).Namespace(h.ns).Patch(context.Background(), "c", types.MergePatchType,
		[]byte(`{"data":{"k":"drifted"}}`), metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	waitGeneration(t, wc, gen)
	if r, _ := tick(reconcile.TriggerInterval); r.Quiet || r.Counts.Updated != 1 {
		t.Fatalf("tick after drift: quiet %t, %d updated; want a full tick that heals", r.Quiet, r.Counts.Updated)
	}
	if got := h.get(gvrConfigMap, "c").Object["data"].(map[string]any)["k"]; got != "v" {
		t.Fatalf("ConfigMap c not healed: k=%v", got)
	}
	untilQuiet("after the heal")

	// A new revision.
	h.repo.Commit("more", map[string]string{"cm.yaml": strings.Replace(quietConfigMap, "k: v", "k: v2", 1)})
	if r, _ := tick(reconcile.TriggerInterval); r.Quiet || r.Counts.Updated != 1 {
		t.Fatalf("tick at a new revision: quiet %t, %d updated", r.Quiet, r.Counts.Updated)
	}
	q := untilQuiet("after the new revision")

	// The Deployment never becomes available (no controller): its progress
	// deadline passes during quiet ticks, and they say so.
	if q.Health.Status == health.Degraded {
		t.Skip("the progress deadline passed before the quiet ticks: the machine is too slow for this part")
	}
	deadline := time.Now().Add(time.Minute) // a guard against a hang
	for {
		r, _ := tick(reconcile.TriggerInterval)
		if r.Health.Status == health.Degraded {
			if !r.Quiet {
				t.Errorf("the progress deadline was seen by a full tick, want a quiet one (nothing changed)")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("health still %s a minute later, with --health-timeout 4s", r.Health.Status)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitGeneration waits until the watch cache's generation moves past gen.
func waitGeneration(t *testing.T, c *watch.Cache, gen uint64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // a guard against a hang
	for {
		if g, _ := c.Generation(); g != gen {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the watch never saw the change")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
