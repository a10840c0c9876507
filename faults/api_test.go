package faults

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/internal/testenv/apiproxy"
)

// apiConfigMaps is a commit of n ConfigMaps api-000.. with data v: value, in
// one file.
func apiConfigMaps(n int, value string) map[string]string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  v: %q\n", apiName(i), value)
	}
	return map[string]string{"cms.yaml": b.String()}
}

func apiName(i int) string { return fmt.Sprintf("api-%03d", i) }

// apiObject is what a test remembers of a live ConfigMap.
type apiObject struct {
	UID   types.UID
	Value string
}

// apiLive is the live api-* ConfigMaps of ns.
func apiLive(t testing.TB, cs kubernetes.Interface, ns string) map[string]apiObject {
	t.Helper()
	l, err := cs.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list configmaps: %v", err)
	}
	out := map[string]apiObject{}
	for _, cm := range l.Items {
		if strings.HasPrefix(cm.Name, "api-") {
			out[cm.Name] = apiObject{UID: cm.UID, Value: cm.Data["v"]}
		}
	}
	return out
}

// apiCheckKept fails the test unless every object of before is still live,
// the same object (UID) with the same value, and the live set is want
// objects, each with value.
func apiCheckKept(t testing.TB, cs kubernetes.Interface, ns string, before map[string]apiObject, want int, value string) {
	t.Helper()
	live := apiLive(t, cs, ns)
	for name, o := range before {
		if got, ok := live[name]; !ok || got.UID != o.UID {
			t.Errorf("%s was deleted or replaced during the fault (before %v, now %v)", name, o, got)
		}
	}
	wantNames, gotNames := map[string]string{}, map[string]string{}
	for i := 0; i < want; i++ {
		wantNames[apiName(i)] = value
	}
	for name, o := range live {
		gotNames[name] = o.Value
	}
	if d := cmp.Diff(wantNames, gotNames); d != "" {
		t.Errorf("live ConfigMaps (-want +got):\n%s", d)
	}
}

// apiNoPrunes fails the test if any tick pruned an object.
func apiNoPrunes(t testing.TB, r *Recond) {
	t.Helper()
	for _, tk := range r.Ticks() {
		if tk.Num("pruned") != 0 {
			t.Errorf("%s pruned %v object(s)", tk, tk.Num("pruned"))
		}
	}
}

// apiFailures is recond_phase_failures_total{phase, reason} (0 when absent).
func apiFailures(r *Recond, phase, reason string) float64 {
	return max(0, r.Metric("recond_phase_failures_total", map[string]string{"phase": phase, "reason": reason}))
}

// apiFailedIn accepts a failed tick in one of phases with one of reasons.
func apiFailedIn(phases, reasons []string) func(Tick) bool {
	return func(tk Tick) bool {
		return tk.Failed() && contains(phases, tk.Phase) && contains(reasons, tk.Reason)
	}
}

func contains(set []string, s string) bool {
	for _, x := range set {
		if x == s {
			return true
		}
	}
	return false
}

// apiMetricMoved fails the test unless recond_phase_failures_total of the
// tick's phase and reason counted it.
func apiMetricMoved(t testing.TB, r *Recond, tk Tick) {
	t.Helper()
	if v := apiFailures(r, tk.Phase, tk.Reason); v < 1 {
		t.Errorf("recond_phase_failures_total{phase=%q,reason=%q} = %v after %s, want at least 1", tk.Phase, tk.Reason, v, tk)
	}
}

// apiAlive fails the test if recond exited.
func apiAlive(t testing.TB, r *Recond) {
	t.Helper()
	if r.Exited() {
		t.Fatalf("recond exited during the fault; last: %s", r.LastTick())
	}
}

// TestFaultAPIServerRestartMidApply stops kube-apiserver (etcd keeps its
// data) while recond applies 300 ConfigMaps, then starts it again: the
// ticks fail as unavailable (or timeout), nothing is pruned, and the loop
// converges once the server is back.
func TestFaultAPIServerRestartMidApply(t *testing.T) {
	cp.Require(t)
	own := testenv.StartRestartableControlPlane(t)
	ns := own.Namespace(t)
	repo := testenv.NewRepo(t)
	const n = 300
	repo.Commit("300 configmaps", apiConfigMaps(n, "v1"))
	// 20 writes a second: the apply takes about 15 s.
	args := append(Base(t, repo.URL(), ns, own.WriteKubeConfig(t)),
		"--interval", "2s", "--tick-timeout", "60s", "--kube-api-qps", "20", "--kube-api-burst", "20")
	r := StartRecond(t, args...)

	deadline := time.Now().Add(60 * time.Second)
	for len(apiLive(t, own.Client, ns)) < 40 {
		if time.Now().After(deadline) {
			t.Fatalf("apply never got under way; last: %s", r.LastTick())
		}
		time.Sleep(20 * time.Millisecond)
	}
	before := apiLive(t, own.Client, ns)
	if len(before) >= n {
		t.Fatalf("apply already done (%d objects) before the stop", len(before))
	}
	stop := time.Now()
	if err := own.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	t.Logf("kube-apiserver stopped in %s with %d of %d objects applied", time.Since(stop).Round(time.Millisecond), len(before), n)
	down := []string{"unavailable", "timeout"}
	first := r.WaitTick(60*time.Second, 0, apiFailedIn([]string{"observe", "apply"}, down))
	// A tick that started while the server was down fails too.
	second := r.WaitTick(60*time.Second, first.ID, apiFailedIn([]string{"observe", "apply"}, down))
	t.Logf("while down: %s; %s", first, second)
	apiMetricMoved(t, r, second)
	apiAlive(t, r)

	if err := own.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	up := time.Now()
	t.Logf("kube-apiserver down for %s", up.Sub(stop).Round(time.Millisecond))
	after := r.LastTick().ID
	r.Recovery("api server stopped mid-apply and restarted", up, after, 2, 120*time.Second, Succeeded)
	r.WaitTick(60*time.Second, after, Converged)
	apiCheckKept(t, own.Client, ns, before, n, "v1")
	apiNoPrunes(t, r)
	apiAlive(t, r)
}

// apiProxied starts recond on a fresh namespace and repo through an
// APIProxy (as the admin) with n ConfigMaps at value v1 and waits until it
// applied them. extra flags go last.
func apiProxied(t *testing.T, n int, extra ...string) (*Recond, *apiproxy.Proxy, *testenv.Repo, string, Tick) {
	t.Helper()
	cp.Require(t)
	ns := cp.Namespace(t)
	repo := testenv.NewRepo(t)
	repo.Commit("v1", apiConfigMaps(n, "v1"))
	p := apiproxy.Start(t, cp.Config)
	r := StartRecond(t, append(Base(t, repo.URL(), ns, p.KubeConfig(t)), extra...)...)
	tk := r.WaitTick(60*time.Second, 0, Succeeded)
	return r, p, repo, ns, tk
}

// apiDrift changes ConfigMap name's value behind recond's back (as the
// admin, not through the proxy).
func apiDrift(t testing.TB, ns, name, value string) {
	t.Helper()
	cm, err := cp.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["v"] = value
	if _, err := cp.Client.CoreV1().ConfigMaps(ns).Update(context.Background(), cm, metav1.UpdateOptions{FieldManager: "drifter"}); err != nil {
		t.Fatalf("drift %s: %v", name, err)
	}
}

// apiWaitValue waits until ConfigMap name has value, and returns when.
func apiWaitValue(t testing.TB, ns, name, value string, timeout time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		cm, err := cp.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err == nil && cm.Data["v"] == value {
			return time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never got value %q in %s (now %v, err %v)", name, value, timeout, cm.Data, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestFaultAPIServerSlow delays every request to the API server by 300 ms:
// ticks still succeed, a new revision and a drift are applied, each within
// 2 ticks, and once the delay is gone the next tick converges.
//
// The tick timeout (apiSlowTickTimeout) is far above what a tick's requests
// cost at that delay (about 1.6 s on an idle machine), so a busy machine
// cannot turn a slow API server into a timed-out tick: no tick may fail. A
// tick that outlives its timeout fails with reason timeout, which the Git
// hang row checks. Every bound is in ticks; the waits are guards against a
// hang, long enough for several whole tick timeouts.
func TestFaultAPIServerSlow(t *testing.T) {
	const (
		n     = 10
		guard = 3 * apiSlowTickTimeout
	)
	r, p, repo, ns, start := apiProxied(t, n, "--interval", "2s", "--tick-timeout", apiSlowTickTimeout.String())
	before := apiLive(t, cp.Client, ns)
	f := p.Add(apiproxy.Fault{Delay: 300 * time.Millisecond})
	on := time.Now()
	// Bound 2: the tick in flight at the commit may have fetched before it.
	committed := r.LastTick().ID
	repo.Commit("v2", apiConfigMaps(n, "v2"))
	at := time.Now()
	applied := r.WaitTick(guard, committed, func(tk Tick) bool { return Succeeded(tk) && tk.Num("updated") > 0 })
	apiWithin(t, r, "new revision while slow", at, committed, applied, 2)
	apiCheckKept(t, cp.Client, ns, before, n, "v2")
	// Bound 2: the tick in flight at the drift may have observed before it.
	drifted := r.LastTick().ID
	apiDrift(t, ns, apiName(0), "drift")
	at = time.Now()
	healed := r.WaitTick(guard, drifted, func(tk Tick) bool { return Succeeded(tk) && tk.Num("healed") > 0 })
	apiWithin(t, r, "drift while slow", at, drifted, healed, 2)
	apiCheckKept(t, cp.Client, ns, before, n, "v2")
	t.Logf("while slow: revision applied by %s (%s), drift healed by %s (%s); %d delayed requests",
		applied, applied.Str("duration"), healed, healed.Str("duration"), f.Hits())
	if f.Hits() == 0 {
		t.Fatal("no request was delayed")
	}
	f.Remove()
	off := time.Now()
	t.Logf("slow for %s", off.Sub(on).Round(time.Millisecond))
	// Bound 2: a tick in flight at the removal (slowed) may end after it.
	r.Recovery("api server slowed (300 ms per request)", off, r.LastTick().ID, 2, guard, Converged)
	apiUnharmed(t, r, ns, before, n, "v2", start.ID)
}

// apiSlowTickTimeout is TestFaultAPIServerSlow's --tick-timeout: more than
// ten times what a tick costs there on an idle machine.
const apiSlowTickTimeout = 20 * time.Second

// apiWithin fails the test unless tk, a tick above after, is at most within
// ticks of the first tick that ended after at: the bound of what happened
// at at (a commit, a drift), counted in ticks.
func apiWithin(t testing.TB, r *Recond, what string, at time.Time, after uint64, tk Tick, within int) {
	t.Helper()
	n := 0
	for _, x := range r.Ticks() {
		if x.ID > after && x.ID <= tk.ID && x.Time().After(at) {
			n++
		}
	}
	if n > within {
		t.Errorf("%s: done by the %d-th tick after it (%s), want within %d", what, n, tk, within)
	}
}

// TestFaultAPIServerErrors answers recond's writes with 429 (Retry-After),
// 500 and 503: a new revision fails in apply with reason unavailable,
// nothing is pruned or half-applied, and the revision is applied once the
// server answers again.
func TestFaultAPIServerErrors(t *testing.T) {
	for _, tc := range []struct {
		name       string
		code       int
		retryAfter int
	}{
		{"429 with Retry-After", 429, 1},
		{"500", 500, 0},
		{"503", 503, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 10
			// client-go waits out Retry-After itself, up to 10 times:
			// the tick timeout leaves room for that.
			r, p, repo, ns, start := apiProxied(t, n, "--interval", "2s", "--tick-timeout", "20s")
			before := apiLive(t, cp.Client, ns)
			f := p.Add(apiproxy.Fault{Match: apiproxy.Match{Method: "PATCH", Path: "/configmaps"}, Status: tc.code, RetryAfter: tc.retryAfter})
			repo.Commit("v2", apiConfigMaps(n, "v2"))
			failed := r.WaitTick(60*time.Second, start.ID, apiFailed)
			if failed.Phase != "apply" || failed.Reason != "unavailable" {
				t.Errorf("%s, want failed in apply with reason unavailable", failed)
			}
			apiMetricMoved(t, r, failed)
			if tc.retryAfter > 0 && f.Hits() < 2 {
				t.Errorf("%d request(s) answered 429, want client-go to have retried after Retry-After", f.Hits())
			}
			// Nothing of v2 was applied, nothing of v1 lost.
			apiCheckKept(t, cp.Client, ns, before, n, "v1")
			apiAlive(t, r)
			t.Logf("while answering %d: %s (%d answers)", tc.code, failed, f.Hits())
			f.Remove()
			off := time.Now()
			// Bound 2: the tick in flight at the removal may still fail.
			r.Recovery(fmt.Sprintf("api server answers %s", tc.name), off, r.LastTick().ID, 2, 60*time.Second,
				func(tk Tick) bool { return Succeeded(tk) && tk.Num("updated") == n })
			apiCheckKept(t, cp.Client, ns, before, n, "v2")
			apiNoPrunes(t, r)
		})
	}
}

// apiFailed accepts a failed tick.
func apiFailed(t Tick) bool { return t.Failed() }

// apiHealedBy waits for the tick above after that healed a drift, and
// returns it.
func apiHealedBy(t testing.TB, r *Recond, after uint64, timeout time.Duration) Tick {
	t.Helper()
	return r.WaitTick(timeout, after, func(tk Tick) bool { return Succeeded(tk) && tk.Num("healed") > 0 })
}

// apiUnharmed fails the test unless the fault left everything as it was:
// every object of before live at value (apiCheckKept, through
// cp.Client), no tick above after failed, none pruned, and recond alive.
func apiUnharmed(t testing.TB, r *Recond, ns string, before map[string]apiObject, want int, value string, after uint64) {
	t.Helper()
	apiCheckKept(t, cp.Client, ns, before, want, value)
	apiNoFailure(t, r, after)
	apiNoPrunes(t, r)
	apiAlive(t, r)
}

// apiNoFailure fails the test if a tick above after failed.
func apiNoFailure(t testing.TB, r *Recond, after uint64) {
	t.Helper()
	for _, tk := range r.Ticks() {
		if tk.ID > after && tk.Failed() {
			t.Errorf("%s: want no failed tick", tk)
		}
	}
}

// TestFaultAPIWatchCut cuts every watch stream mid-stream: the informers
// watch again and a drift made after the cut is healed by a watch-triggered
// tick (the interval, 1m, is too long to be what heals it).
func TestFaultAPIWatchCut(t *testing.T) {
	const n = 5
	r, p, _, ns, start := apiProxied(t, n, "--interval", "1m")
	before := apiLive(t, cp.Client, ns)
	rewatch := p.Add(apiproxy.Fault{Match: apiproxy.Match{Path: "/configmaps", Watch: apiproxy.WatchOnly}})
	cut := time.Now()
	if got := p.CutWatches(); got < 1 {
		t.Fatalf("cut %d watch streams, want at least 1", got)
	}
	apiDrift(t, ns, apiName(1), "drift")
	r.Recovery("watch cut mid-stream", cut, start.ID, 2, 30*time.Second, func(tk Tick) bool {
		return Succeeded(tk) && tk.Num("healed") > 0 && tk.Trigger == "watch"
	})
	if rewatch.Hits() < 1 {
		t.Errorf("no watch request after the cut")
	}
	apiUnharmed(t, r, ns, before, n, "v1", start.ID)
}

// TestFaultAPIWatchStall keeps the watch streams open but forwards no event
// and no bookmark: a tick finds the cache older than --watch-stale-after
// (3 s here; 2m30s by default, two bookmark periods and some), restarts the
// informer and so still catches a drift and heals it while the stall lasts,
// at the first tick that starts once the cache is older than that
// (--interval 2s).
func TestFaultAPIWatchStall(t *testing.T) {
	const n = 5
	const interval, staleAfter = 2 * time.Second, 3 * time.Second
	r, p, _, ns, start := apiProxied(t, n, "--interval", interval.String(), "--watch-stale-after", staleAfter.String())
	before := apiLive(t, cp.Client, ns)
	last := r.LastTick().ID
	stall := p.Add(apiproxy.Fault{Match: apiproxy.Match{Watch: apiproxy.WatchOnly}, Stall: true})
	on := time.Now()
	apiDrift(t, ns, apiName(2), "drift")
	stall.WaitHits(t, 1, minWait) // the drift's event was swallowed
	// Bound: the last event the cache got came before the stall (on), and
	// the first tick that starts once the cache is older than
	// --watch-stale-after heals: every tick before the healing one started
	// by on + staleAfter (a busy machine only starts them later, and a
	// later one heals). In ticks: one in flight or asked for before the
	// stall, the interval ticks within stale-after (two, when a busy
	// machine delays the last event), and the healing one.
	heals := func(tk Tick) bool { return Succeeded(tk) && tk.Num("healed") > 0 }
	healed := r.WaitTick(minWait, last, heals)
	for _, tk := range r.Ticks() {
		if tk.ID <= last || tk.ID >= healed.ID {
			continue
		}
		if begun, _ := tickSpan(t, tk); begun.After(on.Add(staleAfter)) {
			t.Errorf("%s started %s after the stall, the cache older than --watch-stale-after %s, and did not heal",
				tk, begun.Sub(on).Round(time.Millisecond), staleAfter)
		}
	}
	within := int(math.Ceil(float64(staleAfter)/float64(interval))) + 2
	r.Recovery("watch stalled (no events, no bookmarks)", on, last, within, minWait, heals)
	if v := r.Metric("recond_watch_restarts_total", nil); v < 1 {
		t.Errorf("recond_watch_restarts_total = %v after the stall, want at least 1", v)
	}
	if !strings.Contains(r.Log(), `"msg":"watch stalled`) {
		t.Error("no warning that the watch had stalled")
	}
	stall.Remove()
	apiUnharmed(t, r, ns, before, n, "v1", start.ID)
}

// TestFaultAPIWatchExpired ends the open watches with an ERROR event 410
// Expired: the informers relist (a list, not a watch from the same
// resourceVersion) and a drift made after it is healed by a watch-triggered
// tick.
func TestFaultAPIWatchExpired(t *testing.T) {
	const n = 5
	r, p, _, ns, start := apiProxied(t, n, "--interval", "1m")
	before := apiLive(t, cp.Client, ns)
	// A relist is a LIST, or a watch asking for the initial events
	// (client-go's streaming list).
	lists := p.Add(apiproxy.Fault{Match: apiproxy.Match{Method: "GET", Path: "/configmaps", Watch: apiproxy.NoWatch}})
	streams := p.Add(apiproxy.Fault{Match: apiproxy.Match{Path: "/configmaps", Query: "sendInitialEvents=true"}})
	at := time.Now()
	expire := p.Add(apiproxy.Fault{Match: apiproxy.Match{Path: "/configmaps", Watch: apiproxy.WatchOnly}, Expire: true, Times: 1})
	if expire.Hits() != 1 {
		t.Fatalf("expired %d open watch(es), want 1", expire.Hits())
	}
	deadline := time.Now().Add(minWait)
	for lists.Hits()+streams.Hits() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no relist after 410 Expired")
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("relisted %s after the 410 (%d LIST, %d streaming list)", time.Since(at).Round(time.Millisecond), lists.Hits(), streams.Hits())
	apiDrift(t, ns, apiName(3), "drift")
	r.Recovery("watch answered 410 Expired", at, start.ID, 2, 30*time.Second, func(tk Tick) bool {
		return Succeeded(tk) && tk.Num("healed") > 0 && tk.Trigger == "watch"
	})
	apiUnharmed(t, r, ns, before, n, "v1", start.ID)
}

// apiShippedRBAC creates deploy/base's ServiceAccount, Role and RoleBinding
// (as shipped) in ns and returns the RoleBinding, to delete and re-create.
func apiShippedRBAC(t testing.TB, ns string) *rbacv1.RoleBinding {
	t.Helper()
	ctx := context.Background()
	read := func(f string, into any) {
		b, err := os.ReadFile(filepath.Join("..", "deploy", "base", "rbac", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.UnmarshalStrict(b, into); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	var (
		sa   corev1.ServiceAccount
		role rbacv1.Role
		rb   rbacv1.RoleBinding
	)
	read("serviceaccount.yaml", &sa)
	read("role.yaml", &role)
	read("rolebinding.yaml", &rb)
	for i := range rb.Subjects {
		rb.Subjects[i].Namespace = ns
	}
	if _, err := cp.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.RbacV1().Roles(ns).Create(ctx, &role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.RbacV1().RoleBindings(ns).Create(ctx, &rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return &rb
}

// apiToken is a token of ServiceAccount name (TokenRequest).
func apiToken(t testing.TB, ns, name string) string {
	t.Helper()
	secs := int64(3600)
	tr, err := cp.Client.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of %s: %v", name, err)
	}
	return tr.Status.Token
}

// TestFaultAPIRBACRevoked runs recond as the shipped ServiceAccount (its
// own token, through the proxy) and deletes its RoleBinding mid-run: a new
// revision fails with reason forbidden, nothing is pruned or half-applied;
// once the RoleBinding is back the revision is applied.
func TestFaultAPIRBACRevoked(t *testing.T) {
	cp.Require(t)
	const n = 5
	ctx := context.Background()
	ns := cp.Namespace(t)
	rb := apiShippedRBAC(t, ns)
	repo := testenv.NewRepo(t)
	repo.Commit("v1", apiConfigMaps(n, "v1"))
	p := apiproxy.Start(t, cp.Config)
	r := StartRecond(t, append(Base(t, repo.URL(), ns, p.KubeConfigWithToken(t, apiToken(t, ns, "recond"))), "--interval", "2s")...)
	r.WaitTick(60*time.Second, 0, Succeeded)
	before := apiLive(t, cp.Client, ns)

	if err := cp.Client.RbacV1().RoleBindings(ns).Delete(ctx, rb.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	revoked := r.LastTick().ID
	repo.Commit("v2", apiConfigMaps(n, "v2"))
	failed := r.WaitTick(60*time.Second, revoked, apiFailed)
	if !contains([]string{"observe", "apply"}, failed.Phase) || failed.Reason != "forbidden" {
		t.Errorf("%s, want failed in observe or apply with reason forbidden", failed)
	}
	apiMetricMoved(t, r, failed)
	r.WaitTick(30*time.Second, failed.ID, apiFailedIn([]string{"observe", "apply"}, []string{"forbidden"}))
	apiCheckKept(t, cp.Client, ns, before, n, "v1")
	apiAlive(t, r)
	t.Logf("while revoked: %s", failed)

	rb.ResourceVersion = ""
	if _, err := cp.Client.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	r.Recovery("RBAC revoked and restored", back, r.LastTick().ID, 2, 60*time.Second,
		func(tk Tick) bool { return Succeeded(tk) && tk.Num("updated") == n })
	apiCheckKept(t, cp.Client, ns, before, n, "v2")
	apiNoPrunes(t, r)
	apiAlive(t, r)
}

var (
	apiCRDs    = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	apiWidgets = schema.GroupVersionResource{Group: "faults.recond.test", Version: "v1", Resource: "widgets"}
)

// apiCreateCRD creates the Widget CRD and waits until it is served.
func apiCreateCRD(t testing.TB, dyn dynamic.Interface, ns string) {
	t.Helper()
	u := testenv.CRDInGroup(t, "widget", "faults.recond.test")
	if _, err := dyn.Resource(apiCRDs).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create CRD: %v", err)
	}
	deadline := time.Now().Add(minWait)
	for {
		_, err := dyn.Resource(apiWidgets).Namespace(ns).List(context.Background(), metav1.ListOptions{})
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("CRD not served after %s: %v", minWait, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestFaultAPICRDDeleted deletes the CRD of a kind recond manages (and so
// its objects) while it is watched, then re-creates it: the ticks meanwhile
// fail (not_found) without pruning anything else, the log does not flood,
// and once the CRD is back recond re-creates the object and converges.
func TestFaultAPICRDDeleted(t *testing.T) {
	cp.Require(t)
	const n = 3
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	ns := cp.Namespace(t)
	apiCreateCRD(t, dyn, ns)
	t.Cleanup(func() { _ = dyn.Resource(apiCRDs).Delete(ctx, "widgets.faults.recond.test", metav1.DeleteOptions{}) })
	files := apiConfigMaps(n, "v1")
	files["widget.yaml"] = "apiVersion: faults.recond.test/v1\nkind: Widget\nmetadata:\n  name: w1\nspec:\n  size: 1\n"
	repo := testenv.NewRepo(t)
	repo.Commit("v1", files)
	r := StartRecond(t, append(Base(t, repo.URL(), ns, Kubeconfig(t)), "--interval", "2s")...)
	start := r.WaitTick(60*time.Second, 0, Succeeded)
	before := apiLive(t, cp.Client, ns)

	if err := dyn.Resource(apiCRDs).Delete(ctx, "widgets.faults.recond.test", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err := dyn.Resource(apiCRDs).Get(ctx, "widgets.faults.recond.test", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("CRD not gone after 60s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	gone, linesAtGone, tickAtGone := time.Now(), len(r.Lines()), r.LastTick().ID
	failed := r.WaitTick(30*time.Second, start.ID, apiFailed)
	if failed.Reason != "not_found" || !contains([]string{"read", "observe", "apply"}, failed.Phase) {
		t.Errorf("%s, want failed in read, observe or apply with reason not_found", failed)
	}
	apiMetricMoved(t, r, failed)
	// Stay without the CRD for 3 more ticks, counting log lines: the bound
	// is per tick, so a busy machine (slower ticks) cannot reach it, while
	// an error loop, which logs whatever the ticks do, does.
	last := failed
	for range 3 {
		last = r.WaitTick(minWait, last.ID, func(Tick) bool { return true })
	}
	lines := len(r.Lines()) - linesAtGone
	ticks := int(last.ID - tickAtGone)
	t.Logf("without the CRD: %s; %d log lines in %d ticks, %.1f log lines/s", failed, lines, ticks, float64(lines)/time.Since(gone).Seconds())
	if lines > 20*ticks {
		t.Errorf("%d log lines in %d ticks without the CRD, want at most 20 a tick (an error loop?)", lines, ticks)
	}
	apiCheckKept(t, cp.Client, ns, before, n, "v1")
	apiAlive(t, r)

	apiCreateCRD(t, dyn, ns)
	back := time.Now()
	r.Recovery("CRD deleted while watched and re-created", back, r.LastTick().ID, 2, 60*time.Second,
		func(tk Tick) bool { return Succeeded(tk) && tk.Num("created") >= 1 })
	if _, err := dyn.Resource(apiWidgets).Namespace(ns).Get(ctx, "w1", metav1.GetOptions{}); err != nil {
		t.Errorf("widget w1 not re-created: %v", err)
	}
	r.WaitTick(30*time.Second, r.LastTick().ID, Converged)
	apiCheckKept(t, cp.Client, ns, before, n, "v1")
	apiNoPrunes(t, r)
	apiAlive(t, r)
}
