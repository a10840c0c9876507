package faults

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"recond.dev/recond/internal/testenv"
)

// runawayKustomization is 12 KB of kustomization whose build computes for
// minutes: 1,000 ConfigMaps labelled app=x and 100 JSON6902 patches that
// each target all of them by label.
func runawayKustomization() map[string]string {
	var cms, kust strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&cms, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: r%d\n  labels:\n    app: x\ndata:\n  k: v\n", i)
	}
	kust.WriteString("resources:\n- cms.yaml\npatches:\n")
	for i := range 100 {
		fmt.Fprintf(&kust, "- target:\n    kind: ConfigMap\n    labelSelector: app=x\n  patch: '[{\"op\": \"add\", \"path\": \"/data/p%d\", \"value\": \"v\"}]'\n", i)
	}
	return map[string]string{"kustomization.yaml": kust.String(), "cms.yaml": cms.String()}
}

// renderWorkers lists the render workers of process pid.
func renderWorkers(pid int) []int { return testenv.ChildrenWithEnv(pid, "_RECOND_RENDER_WORKER=1") }

// startFirstRevision starts recond with --tick-timeout on a repository at
// firstRevision in a namespace n of its own, and waits for its first
// successful tick.
func startFirstRevision(t *testing.T, tickTimeout string) (repo *testenv.Repo, n string, r *Recond, first Tick) {
	t.Helper()
	cp.Require(t)
	repo = testenv.NewRepo(t)
	repo.Commit("first", firstRevision())
	n = cp.Namespace(t)
	r = StartRecond(t, append(Base(t, repo.URL(), n, Kubeconfig(t)), "--tick-timeout", tickTimeout)...)
	return repo, n, r, r.WaitTick(30*time.Second, 0, Succeeded)
}

// TestFaultManifestRunawayRender: a commit whose kustomize build computes
// for minutes. Each tick's render is stopped at the tick's deadline (its
// worker process killed): the tick fails in read with reason timeout,
// recond_loop_stalls_total{phase="read"} counts it, nothing is applied or
// pruned, the process stays live (/healthz 200) and no worker is left
// running. The author's fix (one ConfigMap) is applied by the next tick
// that reads it: a runaway render does not hold the process.
func TestFaultManifestRunawayRender(t *testing.T) {
	repo, n, r, first := startFirstRevision(t, "3s")
	stalls := r.Metric("recond_loop_stalls_total", map[string]string{"phase": "read"})

	files := faultyRevision(nil)
	for k, v := range runawayKustomization() {
		files[k] = v
	}
	repo.Commit("runaway", files)
	tk := r.WaitTick(time.Minute, first.ID, Tick.Failed)
	if !FailedIn("read", "timeout")(tk) {
		t.Fatalf("the runaway commit's tick: %s; want failed in read, reason timeout", tk)
	}
	tk2 := r.WaitTick(time.Minute, tk.ID, func(Tick) bool { return true })
	if !FailedIn("read", "timeout")(tk2) {
		t.Errorf("the tick after: %s; want failed in read (timeout) again", tk2)
	}
	if after := r.Metric("recond_loop_stalls_total", map[string]string{"phase": "read"}); after < max(stalls, 0)+2 {
		t.Errorf(`recond_loop_stalls_total{phase="read"}: %v then %v; want +2 (one per stopped render)`, stalls, after)
	}
	if code := r.Get("/healthz"); code != 200 {
		t.Errorf("/healthz = %d while renders are stopped; want 200 (the loop ticks)", code)
	}
	if w := renderWorkers(r.Pid()); len(w) > 1 {
		t.Errorf("render workers still running: %v; want at most the current tick's", w)
	}
	firstRevisionIntact(t, n)

	// The fix: kustomize with one ConfigMap, and keep back.
	fixAt := time.Now()
	repo.Commit("fix", map[string]string{
		"kustomization.yaml": "resources:\n- keep.yaml\n- cms.yaml\n",
		"cms.yaml":           manifestCM("only", "v1"),
		"keep.yaml":          manifestCM("keep", "v2"),
	})
	r.Recovery("a runaway render, fixed", fixAt, tk2.ID, 2, 2*time.Minute, Succeeded)
	if d := cmp.Diff([]string{"keep", "only"}, slices.Sorted(maps.Keys(owned(t, n)))); d != "" {
		t.Errorf("owned ConfigMaps after the fix (-want +got):\n%s", d)
	}
	if w := renderWorkers(r.Pid()); len(w) > 0 {
		t.Errorf("render workers still running after the fix converged: %v", w)
	}
}

// TestFaultManifestRunawayRenderSuperseded: with a tick timeout far longer
// than anyone waits (10 minutes), a runaway render is stopped by the fix's
// push itself: while the render runs, the read phase asks Git (every
// --interval, and on every request for a tick) whether the followed ref
// still names the revision being rendered; it does not, so the render's
// worker is killed and the same tick reads, renders and applies the fix.
// recond_renders_superseded_total counts it, and it is not a failure.
func TestFaultManifestRunawayRenderSuperseded(t *testing.T) {
	repo, n, r, first := startFirstRevision(t, "10m")

	repo.Commit("runaway", runawayKustomization())
	// Hang guard: the next tick starts within an interval and renders.
	for deadline := time.Now().Add(2 * time.Minute); len(renderWorkers(r.Pid())) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no render worker started for the runaway commit")
		}
	}
	fix := repo.Commit("fix", faultyRevision(map[string]string{"kustomization.yaml": "", "cms.yaml": ""}))
	// Hang guard: the tick in flight has 10 minutes; without the check it
	// would fail at its deadline, long after this.
	tk := r.WaitTick(3*time.Minute, first.ID, func(Tick) bool { return true })
	if !Succeeded(tk) || !strings.HasPrefix(fix, tk.Str("revision")) {
		t.Fatalf("the tick that was rendering the runaway commit: %s; want it succeeded at the fix %s", tk, fix[:12])
	}
	if got := r.Metric("recond_renders_superseded_total", nil); got < 1 {
		t.Errorf("recond_renders_superseded_total = %v; want at least 1", got)
	}
	if got := r.Metric("recond_loop_stalls_total", map[string]string{"phase": "read"}); got != 0 {
		t.Errorf(`recond_loop_stalls_total{phase="read"} = %v; a superseded render is not a stall`, got)
	}
	if d := cmp.Diff([]string{"keep"}, slices.Sorted(maps.Keys(owned(t, n)))); d != "" {
		t.Errorf("owned ConfigMaps after the fix (-want +got):\n%s", d)
	}
	if w := renderWorkers(r.Pid()); len(w) > 0 {
		t.Errorf("render workers still running after the fix converged: %v", w)
	}
}

// TestRenderCost measures, on the binary, what rendering a revision costs
// in the render binary, a process of its own: the read phase of the tick that renders each of 6
// revisions of a 500-object overlay (the tick lines' read=), and recond's
// resident memory (VmRSS, VmHWM) after them. Not part of make test:
//
//	RECOND_RENDER_COST=1 go test -count=1 -run TestRenderCost -v ./faults/ | grep 'render cost'
func TestRenderCost(t *testing.T) {
	if os.Getenv("RECOND_RENDER_COST") == "" {
		t.Skip("set RECOND_RENDER_COST=1 to measure the render's cost")
	}
	var base strings.Builder
	for i := range 250 {
		fmt.Fprintf(&base, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c%d\ndata:\n  k: v\n", i)
		fmt.Fprintf(&base, "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: s%d\nstringData:\n  k: v\n", i)
	}
	overlay := func(rev int) map[string]string {
		return map[string]string{
			"base/kustomization.yaml": "resources:\n- all.yaml\n",
			"base/all.yaml":           base.String(),
			"kustomization.yaml": fmt.Sprintf("resources:\n- base\nlabels:\n- pairs: {rev: r%d}\npatches:\n"+
				"- target: {kind: ConfigMap}\n  patch: '[{\"op\": \"add\", \"path\": \"/data/extra\", \"value\": \"x\"}]'\n", rev),
		}
	}
	for _, mode := range []struct {
		name  string
		flags []string
	}{{"worker", nil}} {
		t.Run(mode.name, func(t *testing.T) {
			repo := testenv.NewRepo(t)
			repo.Commit("r0", overlay(0))
			n := cp.Namespace(t)
			r := StartRecond(t, append(append(Base(t, repo.URL(), n, Kubeconfig(t)), "--tick-timeout", "2m"), mode.flags...)...)
			last := r.WaitTick(5*time.Minute, 0, Succeeded)
			var reads []time.Duration
			for rev := 1; rev <= 6; rev++ {
				sha := repo.Commit(fmt.Sprintf("r%d", rev), overlay(rev))
				last = r.WaitTick(5*time.Minute, last.ID, func(tk Tick) bool { return Succeeded(tk) && strings.HasPrefix(sha, tk.Str("revision")) })
				d, err := time.ParseDuration(last.Str("read"))
				if err != nil {
					t.Fatalf("tick %s: read=%q: %v", last, last.Str("read"), err)
				}
				reads = append(reads, d)
			}
			slices.Sort(reads)
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", r.Pid()))
			var mem []string
			for _, l := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(l, "VmRSS") || strings.HasPrefix(l, "VmHWM") {
					mem = append(mem, strings.Join(strings.Fields(l), " "))
				}
			}
			t.Logf("render cost %s: read phase of 6 rendered revisions of 500 objects: min %s, median %s, max %s; recond after: %s",
				mode.name, reads[0], reads[len(reads)/2], reads[len(reads)-1], strings.Join(mem, ", "))
		})
	}
}
