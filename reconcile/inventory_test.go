package reconcile_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/reconcile"
	"recond.dev/recond/reconcile/cluster"
	"recond.dev/recond/reconcile/source"
	"recond.dev/recond/reconcile/source/renderer"
)

// capturedLog is a log sink the loop's goroutines may write to.
type capturedLog struct{ testenv.SyncBuffer }

// count is how many log lines contain s.
func (l *capturedLog) count(s string) int { return strings.Count(l.String(), s) }

// logged gives the harness a reconciler whose log (its warnings and the
// tick lines) goes to the returned buffer as well as the test's log.
func (h *harness) logged() *capturedLog {
	h.t.Helper()
	buf := &capturedLog{}
	src, err := source.New(source.Config{Renderer: renderer.InProcess{}, URL: h.url, Path: h.cfg.Path, CacheDir: h.t.TempDir()})
	if err != nil {
		h.t.Fatal(err)
	}
	kube, err := cluster.New(h.rest, h.ns)
	if err != nil {
		h.t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.MultiWriter(buf, testWriter{h.t}), nil))
	h.rec = reconcile.New(h.cfg, src, kube, log, reconcile.LogObserver{Log: log})
	return buf
}

const inventoryLost = "inventory ConfigMap deleted"

// inventoryCM is the instance's live inventory ConfigMap, nil when there is
// none.
func (h *harness) inventoryCM() *unstructured.Unstructured {
	h.t.Helper()
	return h.get(gvrConfigMap, reconcile.InventoryPrefix+h.cfg.Name)
}

func (h *harness) deleteInventory() {
	h.t.Helper()
	if err := h.dyn.Resource(gvrConfigMap).Namespace(h.ns).Delete(context.Background(), reconcile.InventoryPrefix+h.cfg.Name, metav1.DeleteOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// inventoryKinds is the live inventory's kinds line ("" when missing).
func (h *harness) inventoryKinds() string {
	h.t.Helper()
	cm := h.inventoryCM()
	if cm == nil {
		return ""
	}
	s, _, _ := unstructured.NestedString(cm.Object, "data", "kinds")
	return s
}

const appKinds = "v1 ConfigMap\nv1 Service\napps/v1 Deployment"

// A deleted inventory ConfigMap is rewritten by the next tick, from the
// copy in memory, and its loss logged once; a later restart then still
// prunes a kind that left Git. Observing by LIST: the inventory is read by
// GET at every tick.
func TestDeletedInventoryIsRewritten(t *testing.T) {
	h := newHarness(t)
	logs := h.logged()
	h.repo.Commit("app", app())
	h.mustTick(reconcile.OutcomeApplied)
	h.mustTick(reconcile.OutcomeConverged)

	h.deleteInventory()
	h.mustTick(reconcile.OutcomeConverged)
	if got := h.inventoryKinds(); got != appKinds {
		t.Fatalf("inventory kinds after the tick that followed its deletion: %q, want %q", got, appKinds)
	}
	if n := logs.count(inventoryLost); n != 1 {
		t.Errorf("the loss was logged %d times, want 1", n)
	}
	rv := h.inventoryCM().GetResourceVersion()
	h.mustTick(reconcile.OutcomeConverged)
	if got := h.inventoryCM().GetResourceVersion(); got != rv {
		t.Errorf("inventory rewritten again by a converged tick (resourceVersion %s -> %s)", rv, got)
	}
	if n := logs.count(inventoryLost); n != 1 {
		t.Errorf("the loss was logged %d times after a converged tick, want 1", n)
	}

	// Changed by hand (a kind dropped, the revision cleared): written back,
	// the kind kept.
	cm := h.inventoryCM()
	if err := unstructured.SetNestedStringMap(cm.Object, map[string]string{"kinds": "v1 ConfigMap", "revision": ""}, "data"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.dyn.Resource(gvrConfigMap).Namespace(h.ns).Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.mustTick(reconcile.OutcomeConverged)
	if got := h.inventoryKinds(); got != appKinds {
		t.Errorf("inventory kinds after the tick that followed its edit: %q, want %q", got, appKinds)
	}
	if n := logs.count("inventory ConfigMap changed by another writer"); n != 1 {
		t.Errorf("the edit was logged %d times, want 1", n)
	}

	// Deleted again, then a restart after the Service left Git: the new
	// process learns the kind from the rewritten inventory and prunes it.
	h.deleteInventory()
	h.mustTick(reconcile.OutcomeConverged)
	if n := logs.count(inventoryLost); n != 2 {
		t.Errorf("the second loss was logged %d times in all, want 2", n)
	}
	h.repo.Commit("no service", map[string]string{"service.yaml": ""})
	h.rec = nil // a restarted process: nothing in memory
	r := h.mustTick(reconcile.OutcomeApplied)
	if r.Counts.Pruned != 1 || h.get(gvrService, "web") != nil {
		t.Fatalf("pruned %d after the restart, want the Service (changes %v)", r.Counts.Pruned, r.Changes)
	}
}

// A deleted inventory is rewritten even while every tick fails in read (a
// broken commit): the check runs before the phases, so a restart during
// the breakage still knows the kinds, and prunes the one that left Git
// once the commit is fixed.
func TestDeletedInventoryIsRewrittenWhileReadFails(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit("app", app())
	h.mustTick(reconcile.OutcomeApplied)
	h.mustTick(reconcile.OutcomeConverged)

	h.repo.Commit("broken", map[string]string{"broken.yaml": "kind: [\n"})
	h.deleteInventory()
	r := h.mustTick(reconcile.OutcomeFailed)
	if f := r.Failure(); f == nil || f.Phase != reconcile.PhaseRead {
		t.Fatalf("the broken commit's tick failed with %v; want a failure in read", f)
	}
	if got := h.inventoryKinds(); got != appKinds {
		t.Fatalf("inventory kinds after a tick that failed in read: %q, want %q", got, appKinds)
	}

	h.rec = nil // a restart while Git is still broken, then the fix
	h.repo.Commit("fixed, no service", map[string]string{"broken.yaml": "", "service.yaml": ""})
	if r := h.mustTick(reconcile.OutcomeApplied); r.Counts.Pruned != 1 || h.get(gvrService, "web") != nil {
		t.Fatalf("pruned %d after the restart, want the Service (changes %v)", r.Counts.Pruned, r.Changes)
	}
}

// The namespace deleted and re-created (its objects and the inventory gone
// with it): the next tick re-creates the objects and rewrites the
// inventory from memory, so that a restart after a kind left Git still
// prunes it.
func TestRecreatedNamespaceGetsItsInventoryBack(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit("app", app())
	h.mustTick(reconcile.OutcomeApplied)
	h.mustTick(reconcile.OutcomeConverged)
	recreateNamespace(t, h.ns)
	if r := h.mustTick(reconcile.OutcomeApplied); r.Counts.Created != 3 {
		t.Fatalf("created %d in the re-created namespace, want 3", r.Counts.Created)
	}
	if got := h.inventoryKinds(); got != appKinds {
		t.Fatalf("inventory kinds in the re-created namespace: %q, want %q", got, appKinds)
	}
	h.repo.Commit("no service", map[string]string{"service.yaml": ""})
	h.rec = nil
	if r := h.mustTick(reconcile.OutcomeApplied); r.Counts.Pruned != 1 || h.get(gvrService, "web") != nil {
		t.Fatalf("pruned %d after the restart, want the Service", r.Counts.Pruned)
	}
}

// recreateNamespace deletes ns and creates it again, empty. No namespace
// controller runs here: its objects are deleted by hand, then the
// namespace finalized.
func recreateNamespace(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	cs := cp.Client
	if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	all := metav1.ListOptions{}
	for _, del := range []func() error{
		func() error { return cs.CoreV1().ConfigMaps(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, all) },
		func() error {
			return dynamic.NewForConfigOrDie(cp.Config).Resource(gvrService).Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, all)
		},
		func() error { return cs.CoreV1().Secrets(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, all) },
		func() error { return cs.AppsV1().Deployments(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, all) },
	} {
		if err := del(); err != nil {
			t.Fatal(err)
		}
	}
	n, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Spec.Finalizers = nil
	if _, err := cs.CoreV1().Namespaces().Finalize(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if isNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("namespace %s not gone after its finalization (%v)", ns, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Observing by watch, the inventory's deletion is an event: it asks for a
// tick (the interval is an hour), which rewrites it; bound: the second tick
// after the deletion at the latest.
func TestDeletedInventoryIsRewrittenByWatch(t *testing.T) {
	w := newWatched(t, app())
	before := len(w.ticks())
	w.deleteInventory()
	w.waitFor(t, "a tick after the deletion", func(rs []*reconcile.Result) bool { return len(rs) > before })
	if w.inventoryCM() == nil {
		// The tick the event asked for may have started before the cache
		// saw the deletion: one more.
		w.rec.Trigger(reconcile.TriggerManual)
		w.waitFor(t, "a second tick after the deletion", func(rs []*reconcile.Result) bool { return len(rs) > before+1 })
	}
	if got := w.inventoryKinds(); got != appKinds {
		t.Fatalf("inventory kinds two ticks after its deletion: %q, want %q", got, appKinds)
	}
	for _, r := range w.ticks()[before:] {
		if r.Outcome == reconcile.OutcomeFailed {
			t.Errorf("tick %d failed: %v", r.ID, r.Failure())
		}
	}
	// recond's own rewrite asks for no tick; the next one is converged and
	// rewrites nothing.
	rv := w.inventoryCM().GetResourceVersion()
	n := len(w.ticks())
	w.rec.Trigger(reconcile.TriggerManual)
	rs := w.waitFor(t, "a tick after the rewrite", func(rs []*reconcile.Result) bool { return len(rs) > n })
	if last := rs[len(rs)-1]; last.Outcome != reconcile.OutcomeConverged {
		t.Errorf("tick after the rewrite: %s (%v)", last.Outcome, last.Failure())
	}
	if got := w.inventoryCM().GetResourceVersion(); got != rv {
		t.Errorf("inventory rewritten again (resourceVersion %s -> %s)", rv, got)
	}
}

// While the inventory cannot be rewritten (a quota refuses the ConfigMap),
// every tick fails in apply and the loss is logged once, not at every
// tick; once the quota allows it, the next tick rewrites it.
func TestLostInventoryIsLoggedOnce(t *testing.T) {
	h := newHarness(t)
	logs := h.logged()
	h.repo.Commit("app", app())
	h.mustTick(reconcile.OutcomeApplied)
	h.deleteInventory()
	used := h.countConfigMaps()
	h.setQuota(used, used) // full: the inventory cannot come back
	for i := 0; i < 3; i++ {
		r := h.tick()
		expectFailure(t, r, reconcile.PhaseApply, reconcile.ReasonForbidden, "write inventory", "exceeded quota")
	}
	if n := logs.count(inventoryLost); n != 1 {
		t.Errorf("the loss was logged %d times in 3 ticks, want 1", n)
	}
	h.setQuota(used+1, used)
	h.mustTick(reconcile.OutcomeConverged)
	if got := h.inventoryKinds(); got != appKinds {
		t.Errorf("inventory kinds once the quota allows it: %q, want %q", got, appKinds)
	}
}

// countConfigMaps is how many ConfigMaps the namespace holds.
func (h *harness) countConfigMaps() int {
	h.t.Helper()
	l, err := cp.Client.CoreV1().ConfigMaps(h.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return len(l.Items)
}

// setQuota makes (or changes) a ResourceQuota of hard ConfigMaps in the
// namespace, used of them in use, and waits until the API server's quota
// admission holds it. No controller manager runs here: the status (which
// the quota admission reads, and moves as it admits creates) is written by
// hand.
func (h *harness) setQuota(hard, used int) {
	h.t.Helper()
	ctx := context.Background()
	quotas := cp.Client.CoreV1().ResourceQuotas(h.ns)
	q, err := quotas.Get(ctx, "configmaps", metav1.GetOptions{})
	if isNotFound(err) {
		q, err = quotas.Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "configmaps"}}, metav1.CreateOptions{})
	}
	if err != nil {
		h.t.Fatal(err)
	}
	n := func(v int) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceConfigMaps: *resource.NewQuantity(int64(v), resource.DecimalSI)}
	}
	q.Spec.Hard = n(hard)
	if q, err = quotas.Update(ctx, q, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	// First full, so that a refused dry run shows the admission holds the
	// quota; then the status asked for, which a dry run that passes (when
	// there is room) or is refused (when there is none) shows it holds.
	for _, u := range []int{hard, used} {
		q.Status = corev1.ResourceQuotaStatus{Hard: n(hard), Used: n(u)}
		if q, err = quotas.UpdateStatus(ctx, q, metav1.UpdateOptions{}); err != nil {
			h.t.Fatal(err)
		}
		room := u < hard
		deadline := time.Now().Add(30 * time.Second)
		for {
			_, err := cp.Client.CoreV1().ConfigMaps(h.ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "quota-probe"}},
				metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if (err == nil) == room {
				break
			}
			if time.Now().After(deadline) {
				h.t.Fatalf("the quota admission does not hold %d of %d ConfigMaps used (probe: %v)", u, hard, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
