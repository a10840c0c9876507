package reconcile_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"recond.dev/recond/reconcile"
)

// BenchmarkDriftTick measures the tick that one object's drift asks for,
// observing by watch: another manager changes one ConfigMap of 90, 900 or
// 3000, and, once the watch cache holds the change, the tick a watch event
// asks for heals it. ns/op is that tick alone; requests/op are the API
// requests it made (the inventory's left out: the write's dry run and the
// write itself); heal-µs/op is from the change's request to the end of the
// tick, the watch's delivery included; <phase>-µs/op what each phase of
// the tick took.
//
//	go test -run '^$' -bench DriftTick -benchtime 20x ./reconcile/
func BenchmarkDriftTick(b *testing.B) {
	cp.Require(b)
	for _, n := range []int{90, 900, 3000} {
		b.Run(fmt.Sprintf("%d-configmaps", n), func(b *testing.B) {
			h := newHarness(b)
			h.cfg.ApplyConcurrency = 8
			q := &requests{ns: h.ns}
			h.rest = q.config()
			wc := newCache(b, h)
			h.cfg.Live = wc
			h.repo.Commit("set", configMapFiles(n))
			rec := h.reconciler()
			tick := func() *reconcile.Result {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				defer cancel()
				r := rec.TickFor(ctx, reconcile.TriggerWatch)
				if f := r.Failure(); f != nil {
					b.Fatalf("tick failed: %v", f)
				}
				return r
			}
			// The first sync, then ticks until one writes nothing and the
			// cache has seen every write.
			for i := 0; ; i++ {
				gen, _ := wc.Generation()
				r := tick()
				time.Sleep(100 * time.Millisecond)
				if now, _ := wc.Generation(); len(r.Ops) == 0 && now == gen {
					break
				}
				if i == 20 {
					b.Fatal("not settled in 20 ticks")
				}
			}
			cm := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
			var (
				requests int
				heal     time.Duration
				phases   = map[reconcile.Phase]time.Duration{}
			)
			i := 0
			for b.Loop() {
				b.StopTimer()
				name, want := fmt.Sprintf("cm-%04d", i%n), fmt.Sprintf("drift %d", i)
				i++
				start := time.Now()
				if _, err := h.dyn.Resource(gvrConfigMap).Namespace(h.ns).Patch(context.Background(), name, types.MergePatchType,
					[]byte(`{"data":{"k":"`+want+`"}}`), metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
					b.Fatal(err)
				}
				for deadline := time.Now().Add(time.Minute); ; {
					u, err := wc.Get(context.Background(), cm, name)
					if err != nil {
						b.Fatal(err)
					}
					if u != nil {
						if k, _ := u.Object["data"].(map[string]any)["k"].(string); k == want {
							break
						}
					}
					if time.Now().After(deadline) {
						b.Fatal("the watch never saw the change")
					}
					time.Sleep(time.Millisecond)
				}
				q.take()
				b.StartTimer()
				r := tick()
				b.StopTimer()
				heal += time.Since(start)
				for _, p := range reconcile.Phases {
					phases[p] += r.PhaseDuration(p)
				}
				for _, v := range q.take() {
					requests += v
				}
				if r.Counts.Updated != 1 {
					b.Fatalf("drift of %s: %d updated, want 1 (changes %v)", name, r.Counts.Updated, r.Changes)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(requests)/float64(i), "requests/op")
			b.ReportMetric(float64(heal.Microseconds())/float64(i), "heal-µs/op")
			for _, p := range reconcile.Phases {
				b.ReportMetric(float64(phases[p].Microseconds())/float64(i), string(p)+"-µs/op")
			}
		})
	}
}
