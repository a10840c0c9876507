package faults

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/internal/testenv/apiproxy"
)

// TestFaultAPIWatchBookmarksOnly: the ConfigMap watch streams lose every
// event but still pass bookmarks (a proxy that drops what it should
// forward), so the caches look alive: --watch-stale-after (10m here)
// never fires, and the interval ticks (1 s) are quiet, answered from a
// cache that has not seen the drift. The check (--watch-check-every, 3 s
// here; 5m by default) compares each cache with one LIST, finds it behind,
// restarts that watch with a fresh list and hands on the change it missed:
// the drift is healed within a check period. Before, it stayed until the
// periodic relist, 30 to 45 minutes later. With the fault removed, the
// loop converges.
func TestFaultAPIWatchBookmarksOnly(t *testing.T) {
	cp.Require(t)
	repo := testenv.NewRepo(t)
	repo.Commit("cm", map[string]string{"cm.yaml": gitConfigMap("cm-00", "v1")})
	ns := cp.Namespace(t)
	proxy := apiproxy.Start(t, cp.Config)
	const checkEvery = 3 * time.Second
	r := StartRecond(t, append(Base(t, repo.URL(), ns, proxy.KubeConfig(t)),
		"--watch-stale-after", "10m", "--watch-check-every", checkEvery.String())...)
	first := r.WaitTick(60*time.Second, 0, Succeeded)
	ok := r.WaitTick(30*time.Second, first.ID, Converged)
	restarts := r.Metric("recond_watch_restarts_total", nil)

	drop := proxy.Add(apiproxy.Fault{Match: apiproxy.Match{Path: "/configmaps", Watch: apiproxy.WatchOnly}, Drop: true})
	if _, err := cp.Client.CoreV1().ConfigMaps(ns).Patch(context.Background(), "cm-00", types.MergePatchType,
		[]byte(`{"data":{"k":"drifted"}}`), metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	drop.WaitHits(t, 1, time.Minute)
	drifted := time.Now()
	// The check every 3 s (plus a fifth at random), a difference held for
	// 2 s of grace at each of its two LISTs, the restart's sync, then the
	// tick the handed-on change asks for: ticks at 1 s.
	bound := int((time.Duration(1.2*float64(checkEvery))+2*2*time.Second)/time.Second) + 3
	healed := r.Recovery("watch passes bookmarks only: drift healed", drifted, ok.ID, bound, time.Minute,
		func(tk Tick) bool { return tk.Num("healed") > 0 })
	if got := r.Metric("recond_watch_restarts_total", nil); got < restarts+1 {
		t.Errorf("recond_watch_restarts_total = %v, want at least %v", got, restarts+1)
	}
	if !strings.Contains(r.Log(), "behind the API server") {
		t.Error("no log line says the watch cache was behind the API server")
	}
	cm, err := cp.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "cm-00", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["k"] != "v1" {
		t.Errorf("cm-00 k = %q after the heal, want v1", cm.Data["k"])
	}
	t.Logf("drift healed %s after the events were lost (check every %s)", healed.Round(time.Millisecond), checkEvery)

	drop.Remove()
	removed := time.Now()
	last := r.LastTick()
	// The streams opened during the fault stay lossy until they end, so
	// the cache catches up at the next check at the latest.
	r.Recovery("watch passes bookmarks only: fault removed", removed, last.ID, bound, time.Minute, Converged)
}

// TestFaultAPIServerUnreachableWhileConverged: recond has converged and its
// ticks are quiet (nothing changed in the watch caches), when the API
// server becomes unreachable (the proxy in front of it refuses every
// connection). The caches' watches fail, so they no longer vouch for what
// they hold: no tick is quiet, each one reads the API server and fails in
// observe, reason unavailable, instead of reporting converged and healthy
// from memory until --watch-stale-after. Once the API server answers again,
// the next tick converges.
func TestFaultAPIServerUnreachableWhileConverged(t *testing.T) {
	r, p, _, _, first := apiProxied(t, 3)
	ok := r.WaitTick(30*time.Second, first.ID, func(tk Tick) bool { return tk.Outcome == "converged" && tk.Str("quiet") == "true" })
	f0 := gitFailures(r, "observe", "unavailable")

	p.SetDown(true)
	down := time.Now()
	// The tick in flight when the connections closed may still end well.
	tk := r.WaitTick(time.Minute, ok.ID, func(tk Tick) bool { return tk.Time().After(down) })
	tk = r.WaitTick(time.Minute, tk.ID, func(Tick) bool { return true })
	if !FailedIn("observe", "unavailable")(tk) {
		t.Errorf("tick while the API server is unreachable: %s, want failed in observe, reason unavailable", tk)
	}
	for _, x := range r.Ticks() {
		if x.ID > tk.ID-1 && !x.Failed() {
			t.Errorf("%s while the API server was unreachable", x)
		}
	}
	if got := gitFailures(r, "observe", "unavailable"); got < f0+1 {
		t.Errorf("recond_phase_failures_total{phase=observe,reason=unavailable} = %v, want at least %v", got, f0+1)
	}

	p.SetDown(false)
	r.Recovery("API server unreachable while converged", time.Now(), r.LastTick().ID, 2, time.Minute, Converged)
}
