package faults

import (
	"testing"
	"time"

	"recond.dev/recond/internal/testenv"
)

// TestHarness checks the harness itself: a healthy recond converges, its
// ticks are read from the log and its metrics from /metrics.
func TestHarness(t *testing.T) {
	cp.Require(t)
	repo := testenv.NewRepo(t)
	repo.Commit("cm", map[string]string{"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  k: v\n"})
	ns := cp.Namespace(t)
	r := StartRecond(t, Base(t, repo.URL(), ns, Kubeconfig(t))...)
	first := r.WaitTick(30*time.Second, 0, Succeeded)
	r.WaitTick(30*time.Second, first.ID, Converged)
	if v := r.Metric("recond_ticks_total", map[string]string{"outcome": "converged"}); v < 1 {
		t.Errorf("recond_ticks_total{outcome=converged} = %v, want at least 1", v)
	}
	if c := r.Get("/healthz"); c != 200 {
		t.Errorf("/healthz = %d", c)
	}
}
