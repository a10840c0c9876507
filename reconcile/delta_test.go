package reconcile_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"recond.dev/recond/reconcile"
	"recond.dev/recond/reconcile/cluster"
	"recond.dev/recond/reconcile/inventory"
	"recond.dev/recond/reconcile/watch"
)

// deltaFiles are four ConfigMaps, one of them ignoring a field, so that the
// diff has something to skip at every tick.
func deltaFiles() map[string]string {
	files := map[string]string{}
	for _, n := range []string{"a", "b", "c"} {
		files[n+".yaml"] = fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  k: %s\n", n, n)
	}
	files["d.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: d\n  annotations:\n    recond.dev/ignore-fields: /data/free\ndata:\n  k: d\n  free: git\n"
	return files
}

// tickView is what a tick reports of the namespace, without its timing,
// its number or what asked for it.
type tickView struct {
	Outcome                             reconcile.Outcome
	Counts                              reconcile.Counts
	Changes                             []string
	Ops                                 []string
	Skipped                             []reconcile.Skip
	Equivalent, Terminating, BackingOff []string
	Orphaned, Deferred                  []reconcile.ObjectRef
	Health                              *reconcile.Health
	Failure                             string
}

func viewOf(r *reconcile.Result) tickView {
	v := tickView{Outcome: r.Outcome, Counts: r.Counts, Skipped: r.Skipped, Equivalent: r.Equivalent,
		Terminating: r.Terminating, BackingOff: r.BackingOff, Orphaned: r.Orphaned, Deferred: r.Deferred, Health: r.Health}
	for _, c := range r.Changes {
		v.Changes = append(v.Changes, string(c.Action)+" "+c.String())
	}
	for _, op := range r.Ops {
		v.Ops = append(v.Ops, fmt.Sprintf("%s %s/%s %v", op.Action, op.Kind, op.Name, op.Err))
	}
	if f := r.Failure(); f != nil {
		v.Failure = f.Error()
	}
	return v
}

// deltaReconciler is a harness whose reconciler observes through a watch
// cache, and the cache.
func deltaReconciler(t *testing.T, selfHeal bool) (*harness, *watch.Cache) {
	t.Helper()
	h := newHarness(t)
	h.cfg.SelfHeal = selfHeal
	h.repo.Commit("app", deltaFiles())
	kube, err := cluster.New(h.rest, h.ns)
	if err != nil {
		t.Fatal(err)
	}
	wc, err := watch.New(context.Background(), dynamic.NewForConfigOrDie(h.rest), kube, h.ns, watch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wc.Close)
	h.cfg.Live = wc
	h.reconciler()
	return h, wc
}

// tickAs runs one tick asked for by why, failing the test when it fails.
func tickAs(t *testing.T, h *harness, why reconcile.Trigger) *reconcile.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := h.rec.TickFor(ctx, why)
	if f := r.Failure(); f != nil {
		t.Fatalf("tick failed: %v", f)
	}
	return r
}

// settle ticks, as the watches would ask, until a tick writes nothing and
// the watch cache has seen every write (at most 20 ticks).
func settle(t *testing.T, h *harness, wc *watch.Cache) {
	t.Helper()
	for range 20 {
		gen, _ := wc.Generation()
		r := tickAs(t, h, reconcile.TriggerWatch)
		time.Sleep(50 * time.Millisecond)
		if now, _ := wc.Generation(); len(r.Ops) == 0 && now == gen {
			return
		}
	}
	t.Fatal("not settled in 20 ticks")
}

// The tick a watch event asks for reads, compares and assesses only the
// objects that changed (an incremental tick), and finds what a full tick
// finds on the same state: a field drifted, an object deleted, an object
// someone else made with recond's labels, an opt-out annotation added to a
// live object. Self-heal is off, so that neither tick changes the state the
// other sees.
func TestIncrementalTickFindsWhatAFullTickFinds(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, h *harness)
		want   string // in the incremental tick's changes or skips
	}{
		{"drifted field", func(t *testing.T, h *harness) {
			patchConfigMap(t, h, "a", `{"data":{"k":"drifted"}}`)
		}, "update ConfigMap/a data.k"},
		{"deleted object", func(t *testing.T, h *harness) {
			if err := h.dyn.Resource(gvrConfigMap).Namespace(h.ns).Delete(context.Background(), "b", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}, "create ConfigMap/b: create"},
		{"object added by someone else", func(t *testing.T, h *harness) {
			cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": "extra", "labels": map[string]any{
					reconcile.LabelManagedBy: reconcile.ManagedByValue, reconcile.LabelInstance: "recond"}},
				"data": map[string]any{"k": "by hand"}}}
			if _, err := h.dyn.Resource(gvrConfigMap).Namespace(h.ns).Create(context.Background(), cm, metav1.CreateOptions{FieldManager: "kubectl"}); err != nil {
				t.Fatal(err)
			}
		}, "delete ConfigMap/extra: delete"},
		{"owner label removed live", func(t *testing.T, h *harness) {
			patchConfigMap(t, h, "c", `{"metadata":{"labels":{"`+reconcile.LabelInstance+`":null}}}`)
		}, "update ConfigMap/c"},
		{"opt-out annotation added live", func(t *testing.T, h *harness) {
			patchConfigMap(t, h, "c", `{"metadata":{"annotations":{"`+reconcile.AnnotationReconcile+`":"disabled"}},"data":{"k":"mine now"}}`)
		}, "ConfigMap/c (reconcile_disabled)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, wc := deltaReconciler(t, false)
			if r := tickAs(t, h, reconcile.TriggerInterval); r.Outcome != reconcile.OutcomeApplied {
				t.Fatalf("first sync: %s", r.Outcome)
			}
			settle(t, h, wc)
			gen, _ := wc.Generation()
			tc.change(t, h)
			waitGeneration(t, wc, gen)
			before := reconcile.IncrementalTicks(h.rec)
			inc := tickAs(t, h, reconcile.TriggerWatch)
			if reconcile.IncrementalTicks(h.rec) != before+1 {
				t.Fatalf("the tick the change asked for was not incremental")
			}
			full := tickAs(t, h, reconcile.TriggerManual)
			if reconcile.IncrementalTicks(h.rec) != before+1 {
				t.Fatalf("a tick asked for by hand was incremental")
			}
			if d := cmp.Diff(viewOf(full), viewOf(inc)); d != "" {
				t.Errorf("the incremental tick differs from a full one (-full +incremental):\n%s", d)
			}
			found := fmt.Sprint(viewOf(inc).Changes, inc.Skipped)
			if !strings.Contains(found, tc.want) {
				t.Errorf("incremental tick found %s; want %q in it", found, tc.want)
			}
		})
	}
}

// With self-heal on, the tick a drift asks for heals it incrementally, and
// so does the next one, which reads the written object again; both find
// what a full tick finds (the objects owned and the inventory recorded
// included), and the namespace stays converged.
func TestIncrementalHealThenConverged(t *testing.T) {
	h, wc := deltaReconciler(t, true)
	tickAs(t, h, reconcile.TriggerInterval)
	settle(t, h, wc)
	drifts := []string{`{"data":{"k":"drift 0"}}`, `{"metadata":{"labels":{"` + reconcile.LabelInstance + `":null}},"data":{"k":"drift 1"}}`,
		`{"data":{"k":"drift 2"}}`}
	for i, drift := range drifts {
		gen, _ := wc.Generation()
		patchConfigMap(t, h, "a", drift)
		waitGeneration(t, wc, gen)
		before := reconcile.IncrementalTicks(h.rec)
		r := tickAs(t, h, reconcile.TriggerWatch)
		if r.Counts.Updated != 1 || reconcile.IncrementalTicks(h.rec) != before+1 {
			t.Fatalf("drift %d: updated %d, incremental %t; want a heal by an incremental tick", i, r.Counts.Updated, reconcile.IncrementalTicks(h.rec) != before)
		}
		healed := h.get(gvrConfigMap, "a")
		if got := healed.Object["data"].(map[string]any)["k"]; got != "a" || healed.GetLabels()[reconcile.LabelInstance] != "recond" {
			t.Fatalf("drift %d: not healed: k=%v, labels %v", i, got, healed.GetLabels())
		}
		waitGeneration(t, wc, gen+1)
		time.Sleep(50 * time.Millisecond) // the write's own event
		next := tickAs(t, h, reconcile.TriggerWatch)
		if next.Outcome != reconcile.OutcomeConverged || reconcile.IncrementalTicks(h.rec) != before+2 {
			t.Fatalf("drift %d: the tick after the heal: %s, incremental %t", i, next.Outcome, reconcile.IncrementalTicks(h.rec) == before+2)
		}
		inv := h.get(gvrConfigMap, inventory.Name("recond"))
		full := tickAs(t, h, reconcile.TriggerManual)
		if d := cmp.Diff(viewOf(full), viewOf(next)); d != "" {
			t.Errorf("drift %d: the tick after the heal differs from a full one (-full +incremental):\n%s", i, d)
		}
		// The full tick records the inventory the incremental ones did:
		// it finds nothing to rewrite.
		if after := h.get(gvrConfigMap, inventory.Name("recond")); after.GetResourceVersion() != inv.GetResourceVersion() {
			t.Errorf("drift %d: the full tick rewrote the inventory the incremental ones recorded: %v, then %v", i, inv.Object["data"], after.Object["data"])
		}
	}
}

func patchConfigMap(t *testing.T, h *harness, name, patch string) {
	t.Helper()
	if _, err := h.dyn.Resource(gvrConfigMap).Namespace(h.ns).Patch(context.Background(), name, types.MergePatchType,
		[]byte(patch), metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
}
