package faults

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/reconcile"
)

// The inventory ConfigMap deleted (kubectl delete) while recond holds the
// namespace, observing by watch (the default): the deletion is a watch
// event, and the tick it asks for (or the next interval's) rewrites the
// inventory from the copy in memory, with one warning naming it, not one
// per tick. A restart after a kind left Git then still prunes that kind's
// objects (the restarted process learns the kind from the rewritten
// inventory; before, the Service stayed and the tick said pruned=0).
func TestFaultInventoryDeleted(t *testing.T) {
	const (
		cm  = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  k: v\n"
		svc = "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\nspec:\n  ports:\n  - port: 80\n"
	)
	repo := testenv.NewRepo(t)
	rev := repo.Commit("app", map[string]string{"cm.yaml": cm, "svc.yaml": svc})
	ns := cp.Namespace(t)
	args := Base(t, repo.URL(), ns, Kubeconfig(t))
	r := StartRecond(t, args...)
	last := r.WaitTick(time.Minute, 0, Converged)
	name := reconcile.InventoryPrefix + "recond"
	want := map[string]string{"kinds": "v1 ConfigMap\nv1 Service", "revision": rev}

	deleted := time.Now()
	if err := cp.Client.CoreV1().ConfigMaps(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	rewritten := func(tk Tick) bool {
		if tk.Failed() {
			return false
		}
		for _, l := range r.Lines() {
			if l.Msg() == "inventory ConfigMap rewritten" && !l.Time().Before(deleted) && !l.Time().After(tk.Time()) {
				return true
			}
		}
		return false
	}
	r.Recovery("inventory ConfigMap deleted", deleted, last.ID, 2, time.Minute, rewritten)
	if d := cmp.Diff(want, inventoryOf(t, ns)); d != "" {
		t.Errorf("inventory after the rewrite (-want +got):\n%s", d)
	}
	// Two more ticks: the loss is not reported again.
	now := r.LastTick()
	r.WaitTick(time.Minute, now.ID+1, Converged)
	warnings := 0
	for _, l := range r.Lines() {
		if strings.HasPrefix(l.Msg(), "inventory ConfigMap deleted") {
			warnings++
			if l.Str("configmap") != name || l.Str("level") != "WARN" {
				t.Errorf("the warning does not name the ConfigMap at level WARN: %v", l)
			}
		}
	}
	if warnings != 1 {
		t.Errorf("the loss was logged %d times, want once", warnings)
	}

	// A restart after the Service left Git: pruned.
	r.Signal(syscall.SIGTERM)
	if code, _ := r.Wait(30 * time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM", code)
	}
	repo.Commit("no service", map[string]string{"svc.yaml": ""})
	restart := time.Now()
	r2 := StartRecond(t, args...)
	r2.Recovery("restart after a kind left Git (inventory rewritten)", restart, 0, 2, time.Minute, Converged)
	pruned := 0.0
	for _, tk := range r2.Ticks() {
		pruned += tk.Num("pruned")
	}
	if pruned != 1 {
		t.Errorf("pruned %v after the restart, want 1 (the Service)", pruned)
	}
	if _, err := cp.Client.CoreV1().Services(ns).Get(context.Background(), "s", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Service is still there after the restart (err %v)", err)
	}
}
