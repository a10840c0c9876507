package reconcile_test

import (
	"fmt"
	"testing"

	"recond.dev/recond/reconcile"
)

// BenchmarkTick measures whole ticks against the real API server: the first
// sync of a fresh namespace, and a converged tick (nothing to write), for the
// demo app (3 objects) and for 100 ConfigMaps.
//
//	make bench   (or: go test -run '^$' -bench Tick ./reconcile/)
func BenchmarkTick(b *testing.B) {
	needCluster(b)
	many := map[string]string{}
	for i := range 100 {
		many[fmt.Sprintf("cm-%03d.yaml", i)] = fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%03d\ndata:\n  k: v%d\n", i, i)
	}
	for _, set := range []struct {
		name  string
		files map[string]string
	}{{"app", app()}, {"100-configmaps", many}} {
		b.Run(set.name+"/first-sync", func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				h := newHarness(b)
				h.repo.Commit("set", set.files)
				h.reconciler()
				b.StartTimer()
				if r := h.tick(); r.Outcome != reconcile.OutcomeApplied {
					b.Fatalf("outcome %s: %v", r.Outcome, r.Failure())
				}
			}
		})
		b.Run(set.name+"/converged", func(b *testing.B) {
			h := newHarness(b)
			h.repo.Commit("set", set.files)
			h.mustTick(reconcile.OutcomeApplied)
			for b.Loop() {
				if r := h.tick(); r.Outcome != reconcile.OutcomeConverged {
					b.Fatalf("outcome %s: %v", r.Outcome, r.Failure())
				}
			}
		})
	}
}
