package faults

import (
	"context"
	"encoding/json"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/internal/testenv/apiproxy"
	"recond.dev/recond/reconcile"
)

// intruderApply sets data.k of ConfigMap name to value with server-side
// apply as field manager "intruder", taking the field from recond (force).
func intruderApply(ctx context.Context, ns, name, value string) error {
	patch, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name}, "data": map[string]string{"k": value}})
	force := true
	_, err := cp.Client.CoreV1().ConfigMaps(ns).Patch(ctx, name, types.ApplyPatchType, patch,
		metav1.PatchOptions{FieldManager: "intruder", Force: &force})
	return err
}

// TestFaultConflictFieldFight: another field manager rewrites data.k of a
// ConfigMap recond owns every 200 ms for 20 s (server-side apply, forced).
// recond counts the fight (recond_self_heal_conflicts_total), warns, and
// backs off that object with a doubling back-off (2 s, 4 s, 8 s, ... up to
// 5 min), so its writes to the object stay a handful instead of one per
// rewrite (about 100 in 20 s without the back-off). The other objects keep
// converging. Once the other manager stops, recond restores its value when
// the back-off in force ends: the bound is that back-off, in ticks, plus two.
func TestFaultConflictFieldFight(t *testing.T) {
	repo := testenv.NewRepo(t)
	repo.Commit("first", map[string]string{"fought.yaml": manifestCM("fought", "v1"), "keep.yaml": manifestCM("keep", "v1")})
	n := cp.Namespace(t)
	r := StartRecond(t, Base(t, repo.URL(), n, Kubeconfig(t))...)
	first := r.WaitTick(30*time.Second, 0, Succeeded)
	r.WaitTick(30*time.Second, first.ID, Converged)

	ops := func() float64 {
		return r.Metric("recond_resource_operations_total", map[string]string{"action": "update"})
	}
	conflicts0, updates0 := r.Metric("recond_self_heal_conflicts_total", nil), ops()
	startID := r.LastTick().ID
	ctx, stop := context.WithCancel(context.Background())
	var (
		wg       sync.WaitGroup
		intruded atomic.Int64
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(200 * time.Millisecond)
		defer tk.Stop()
		for {
			if err := intruderApply(ctx, n, "fought", "theirs"); err == nil {
				intruded.Add(1)
			}
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
		}
	}()
	const fight = 20 * time.Second
	time.Sleep(fight)
	stop()
	wg.Wait()
	stopped, stoppedTick := time.Now(), r.LastTick()

	writes := ops() - updates0
	conflicts := r.Metric("recond_self_heal_conflicts_total", nil) - conflicts0
	var backoffs []time.Duration
	var lastFight time.Time
	for _, l := range r.Lines() {
		if l.Msg() == "another manager keeps changing an object recond owns; self-heal backs off" && l.Time().After(r.Start) {
			d, err := time.ParseDuration(l.Str("backoff"))
			if err != nil {
				t.Fatalf("backoff %q: %v", l.Str("backoff"), err)
			}
			backoffs = append(backoffs, d)
			lastFight = l.Time()
		}
	}
	var backingOff, ticks int
	for _, tk := range r.Ticks() {
		if tk.ID <= startID {
			continue
		}
		ticks++
		if tk.Str("backing_off") != "" {
			backingOff++
		}
		if tk.Failed() {
			t.Errorf("a tick failed during the fight: %s", tk)
		}
	}
	t.Logf("fight of %s: %d writes by the other manager, %d ticks, %v writes by recond, %v fights counted, back-offs %v, %d ticks backing off",
		fight, intruded.Load(), ticks, writes, conflicts, backoffs, backingOff)
	if r.Exited() {
		t.Fatal("recond exited during the fight")
	}
	if conflicts < 2 || len(backoffs) < 2 || backingOff == 0 {
		t.Fatalf("the fight was not counted or did not back off: %v conflicts, back-offs %v, %d ticks backing off", conflicts, backoffs, backingOff)
	}
	for i := 1; i < len(backoffs); i++ {
		if backoffs[i] != min(2*backoffs[i-1], 5*time.Minute) {
			t.Errorf("back-offs %v: not doubling up to the cap", backoffs)
			break
		}
	}
	// One write per rewrite would be about intruded; a doubling back-off
	// from 2 s allows about log2(20 s / 2 s) + 2 in 20 s.
	if limit := math.Log2(float64(fight/(2*time.Second))) + 3; writes > limit {
		t.Errorf("%v writes by recond in %s of fighting (the other manager wrote %d times), want at most %.0f", writes, fight, intruded.Load(), limit)
	}
	if v, _ := liveValue(t, n, "keep"); v != "v1" {
		t.Errorf("ConfigMap keep: %q, want v1", v)
	}

	// The other manager has stopped: the write when the back-off ends
	// restores recond's value.
	remaining := lastFight.Add(backoffs[len(backoffs)-1]).Sub(stopped)
	within := int(math.Ceil(max(remaining, 0).Seconds())) + 2
	d := r.Recovery("a field fight, after the other manager stopped", stopped, stoppedTick.ID, within, remaining+30*time.Second,
		func(tk Tick) bool { return tk.Num("updated") >= 1 && !tk.Failed() })
	if v, _ := liveValue(t, n, "fought"); v != "v1" {
		t.Errorf("ConfigMap fought after recovery: %q, want v1", v)
	}
	t.Logf("restored %s after the other manager stopped (back-off left then: %s; bound %d ticks)",
		d.Round(time.Millisecond), remaining.Round(time.Millisecond), within)
}

// TestFaultConflictPruneModified: three objects recond owns leave Git, and
// someone else changes them after the tick that prunes them observed them,
// while its DELETEs are on their way (held by a proxy): one gets a new label
// and value (still recond's labels), one loses the managed-by label and one
// is handed to another instance (no longer recond's). The prunes carry the
// observed resourceVersion: the server refuses all three, the tick defers
// them without failing, and the next tick prunes only what still carries
// recond's ownership labels, leaving the other two with the other actor's
// changes intact.
func TestFaultConflictPruneModified(t *testing.T) {
	repo := testenv.NewRepo(t)
	repo.Commit("first", map[string]string{
		"keep.yaml": manifestCM("keep", "v1"), "edited.yaml": manifestCM("edited", "v1"),
		"unlabelled.yaml": manifestCM("unlabelled", "v1"), "reassigned.yaml": manifestCM("reassigned", "v1"),
	})
	n := cp.Namespace(t)
	proxy := apiproxy.Start(t, cp.Config)
	// An interval of an hour: after the first, ticks come only from the
	// watch, so the first edit below is what starts the pruning tick.
	r := StartRecond(t, append(Base(t, repo.URL(), n, proxy.KubeConfig(t)), "--interval", "1h")...)
	first := r.WaitTick(30*time.Second, 0, Succeeded)
	if first.Num("created") != 4 {
		t.Fatalf("first tick: %s, created %v, want 4", first, first.Num("created"))
	}
	repo.Commit("drop three", map[string]string{"edited.yaml": "", "unlabelled.yaml": "", "reassigned.yaml": ""})
	time.Sleep(500 * time.Millisecond)
	if tk := r.LastTick(); tk.ID != first.ID {
		t.Fatalf("a tick ran before the edits: %s", tk)
	}

	ctx := context.Background()
	patch := func(name, p string) {
		t.Helper()
		if _, err := cp.Client.CoreV1().ConfigMaps(n).Patch(ctx, name, types.MergePatchType, []byte(p),
			metav1.PatchOptions{FieldManager: "someone"}); err != nil {
			t.Fatalf("patch %s: %v", name, err)
		}
	}
	release := make(chan struct{})
	held := proxy.Add(apiproxy.Fault{Match: apiproxy.Match{Method: "DELETE", Path: "/configmaps/"}, Hold: release})
	// The first edit starts the tick; its three prunes are held on the wire.
	patch("edited", `{"metadata":{"labels":{"team":"x"}}}`)
	held.WaitHits(t, 3, 30*time.Second)
	// Then the edits the tick did not see.
	patch("unlabelled", `{"metadata":{"labels":{"`+reconcile.LabelManagedBy+`":null}},"data":{"k":"mine"}}`)
	patch("reassigned", `{"metadata":{"labels":{"`+reconcile.LabelInstance+`":"other"}},"data":{"k":"mine"}}`)
	patch("edited", `{"data":{"k":"theirs"}}`)
	edited := time.Now()
	close(release)

	deferred := r.WaitTick(30*time.Second, first.ID, func(tk Tick) bool { return tk.Str("prune_deferred") != "" || tk.Num("pruned") > 0 || tk.Failed() })
	if deferred.Failed() || deferred.Num("pruned") != 0 || deferred.Str("prune_deferred") == "" {
		t.Fatalf("the tick that observed the objects before the edits: %s, pruned %v, prune_deferred %q; want every prune deferred",
			deferred, deferred.Num("pruned"), deferred.Str("prune_deferred"))
	}
	pruning := r.WaitTick(30*time.Second, deferred.ID, func(tk Tick) bool { return tk.Num("pruned") > 0 || tk.Failed() })
	if pruning.Failed() || pruning.Num("pruned") != 1 {
		t.Fatalf("the pruning tick: %s, pruned %v; want one object pruned", pruning, pruning.Num("pruned"))
	}
	// Let any tick the prune's own events ask for run.
	time.Sleep(time.Second)
	var pruned float64
	for _, tk := range r.Ticks() {
		if tk.ID > first.ID {
			pruned += tk.Num("pruned")
			if tk.Failed() {
				t.Errorf("tick failed: %s", tk)
			}
		}
	}
	if pruned != 1 {
		t.Errorf("%v objects pruned in all, want 1", pruned)
	}
	if _, ok := liveValue(t, n, "edited"); ok {
		t.Error("ConfigMap edited (still recond's, gone from Git) was not pruned")
	}
	for name, labels := range map[string]map[string]string{
		"unlabelled": {reconcile.LabelInstance: "recond"},
		"reassigned": {reconcile.LabelManagedBy: reconcile.ManagedByValue, reconcile.LabelInstance: "other"},
	} {
		cm, err := cp.Client.CoreV1().ConfigMaps(n).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("ConfigMap %s (no longer recond's) was pruned: %v", name, err)
			continue
		}
		checkForeign(t, cm, labels)
	}
	if v, _ := liveValue(t, n, "keep"); v != "v1" {
		t.Errorf("ConfigMap keep: %q, want v1", v)
	}
	t.Logf("deferred by %s (%s); pruned by %s, %s after the last edit", deferred, deferred.Str("prune_deferred"),
		pruning, pruning.Time().Sub(edited).Round(time.Millisecond))
}

// checkForeign checks that a ConfigMap recond left alone keeps what the
// other actor wrote: its value and its labels.
func checkForeign(t *testing.T, cm *corev1.ConfigMap, labels map[string]string) {
	t.Helper()
	if cm.Data["k"] != "mine" {
		t.Errorf("ConfigMap %s: k = %q, want the other actor's %q", cm.Name, cm.Data["k"], "mine")
	}
	for k, v := range labels {
		if cm.Labels[k] != v {
			t.Errorf("ConfigMap %s: label %s = %q, want %q", cm.Name, k, cm.Labels[k], v)
		}
	}
	if _, ok := labels[reconcile.LabelManagedBy]; !ok {
		if _, has := cm.Labels[reconcile.LabelManagedBy]; has {
			t.Errorf("ConfigMap %s: label %s is back: recond re-adopted it", cm.Name, reconcile.LabelManagedBy)
		}
	}
}
