package faults

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/internal/testenv/apiproxy"
	"recond.dev/recond/reconcile"
)

// perFile is how many ConfigMaps one manifest file of a large desired set
// holds.
const perFile = 100

// configMapFiles renders ConfigMaps cm-<from>..cm-<to-1> as manifest files
// of perFile objects each (bulk/<first index>.yaml), their data stamped with
// tag.
func configMapFiles(from, to int, tag string) map[string]string {
	files := map[string]string{}
	for f := from; f < to; f += perFile {
		var b strings.Builder
		for i := f; i < min(f+perFile, to); i++ {
			fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%05d\ndata:\n  tag: %q\n  index: %q\n", i, tag, fmt.Sprint(i))
		}
		files[fmt.Sprintf("bulk/%05d.yaml", f)] = b.String()
	}
	return files
}

// names are the ConfigMap names configMapFiles renders for [from, to).
func names(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("cm-%05d", i))
	}
	return out
}

// owned lists the ConfigMaps the instance "recond" owns in ns, by name.
func owned(t testing.TB, ns string) map[string]corev1.ConfigMap {
	t.Helper()
	sel := labels.SelectorFromSet(labels.Set{reconcile.LabelManagedBy: reconcile.ManagedByValue, reconcile.LabelInstance: "recond"})
	l, err := cp.Client.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		t.Fatalf("list owned ConfigMaps: %v", err)
	}
	out := map[string]corev1.ConfigMap{}
	for _, c := range l.Items {
		out[c.Name] = c
	}
	return out
}

// uids are the UIDs of cms by name.
func uids(cms map[string]corev1.ConfigMap) map[string]types.UID {
	out := map[string]types.UID{}
	for n, c := range cms {
		out[n] = c.UID
	}
	return out
}

// inventoryOf is the inventory ConfigMap's data of instance "recond" in ns
// (nil when it does not exist).
func inventoryOf(t testing.TB, ns string) map[string]string {
	t.Helper()
	c, err := cp.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), reconcile.InventoryPrefix+"recond", metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return c.Data
}

// creations counts the owned ConfigMaps created in ns from now on, through
// a watch (no polling LIST of thousands of objects).
type creations struct {
	w     watch.Interface
	count chan int
}

func watchCreations(t testing.TB, ns string) *creations {
	t.Helper()
	sel := labels.SelectorFromSet(labels.Set{reconcile.LabelInstance: "recond"}).String()
	// From the list's resourceVersion: a watch without one starts with an
	// ADDED event for every existing object.
	l, err := cp.Client.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{LabelSelector: sel, Limit: 1})
	if err != nil {
		t.Fatalf("list ConfigMaps: %v", err)
	}
	w, err := cp.Client.CoreV1().ConfigMaps(ns).Watch(context.Background(), metav1.ListOptions{LabelSelector: sel, ResourceVersion: l.ResourceVersion})
	if err != nil {
		t.Fatalf("watch ConfigMaps: %v", err)
	}
	c := &creations{w: w, count: make(chan int, 1<<16)}
	go func() {
		n := 0
		for ev := range w.ResultChan() {
			if ev.Type == watch.Added {
				n++
				c.count <- n
			}
		}
		close(c.count)
	}()
	t.Cleanup(w.Stop)
	return c
}

// wait returns once n objects were created, failing the test after timeout.
func (c *creations) wait(t testing.TB, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case got, ok := <-c.count:
			if !ok {
				t.Fatalf("watch ended before %d creations", n)
			}
			if got >= n {
				return
			}
		case <-deadline:
			t.Fatalf("fewer than %d objects created after %s", n, timeout)
		}
	}
}

// processArgs are Base's flags for the large first syncs of this file: a
// tick timeout long enough for the whole apply (Base's interval is 1 s and
// the timeout defaults to it).
func processArgs(t testing.TB, repoURL, ns, kubeconfig string, more ...string) []string {
	return append(Base(t, repoURL, ns, kubeconfig), append([]string{"--tick-timeout", "5m"}, more...)...)
}

// checkConverged checks, after convergence, that the owned ConfigMaps are
// exactly want, each with data stamped tag, that those in kept still have
// their UIDs (never deleted and recreated), that the inventory records the
// kind and revision rev, and that the bystander (a ConfigMap recond does not
// own) is untouched.
func checkConverged(t *testing.T, ns string, want []string, tag string, kept map[string]types.UID, rev string, bystander types.UID) {
	t.Helper()
	checkConvergedKinds(t, ns, want, tag, kept, "v1 ConfigMap", rev, bystander)
}

// checkConvergedKinds is checkConverged with the inventory's kinds line.
func checkConvergedKinds(t *testing.T, ns string, want []string, tag string, kept map[string]types.UID, kinds, rev string, bystander types.UID) {
	t.Helper()
	got := owned(t, ns)
	if d := cmp.Diff(want, slices.Sorted(maps.Keys(got))); d != "" {
		t.Errorf("owned ConfigMaps after convergence (-want +got):\n%s", d)
	}
	var stale []string
	for n, c := range got {
		if c.Data["tag"] != tag || c.Annotations[reconcile.AnnotationRevision] != rev {
			stale = append(stale, n)
		}
	}
	if len(stale) > 0 {
		slices.Sort(stale)
		t.Errorf("%d ConfigMaps not at revision %s with tag %q, e.g. %s", len(stale), rev[:8], tag, stale[0])
	}
	var recreated []string
	for n, uid := range kept {
		if c, ok := got[n]; ok && c.UID != uid {
			recreated = append(recreated, n)
		}
	}
	if len(recreated) > 0 {
		t.Errorf("%d ConfigMaps were deleted and recreated, e.g. %s", len(recreated), recreated[0])
	}
	if d := cmp.Diff(map[string]string{"kinds": kinds, "revision": rev}, inventoryOf(t, ns)); d != "" {
		t.Errorf("inventory after convergence (-want +got):\n%s", d)
	}
	b, err := cp.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "bystander", metav1.GetOptions{})
	if err != nil || b.UID != bystander {
		t.Errorf("the bystander ConfigMap recond does not own was deleted or replaced (err %v)", err)
	}
}

// bystander creates a ConfigMap in ns that recond does not own.
func bystander(t *testing.T, ns string) types.UID {
	t.Helper()
	c, err := cp.Client.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "bystander"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c.UID
}

// processRow is the start of a process row: a repository whose commit msg
// (rev) holds the ConfigMaps 0 to n-1 at "one", a namespace, and the
// bystander ConfigMap in it.
func processRow(t *testing.T, msg string, n int) (repo *testenv.Repo, rev, ns string, by types.UID) {
	t.Helper()
	cp.Require(t)
	repo = testenv.NewRepo(t)
	rev = repo.Commit(msg, configMapFiles(0, n, "one"))
	ns = cp.Namespace(t)
	return repo, rev, ns, bystander(t, ns)
}

// A SIGTERM while the first sync of 1,500 objects is being written: recond
// finishes the writes in flight, starts no further one, and exits 0 well
// within Kubernetes' default grace period (30 s). What it wrote is whole,
// the inventory lists the kind but not the revision (it was not applied in
// full), and the next start writes the rest and converges without deleting
// anything.
func TestFaultProcessSIGTERMDuringApply(t *testing.T) {
	const n = 1500
	repo, rev, ns, by := processRow(t, "bulk", n)
	kubeconfig := Kubeconfig(t)
	cr := watchCreations(t, ns)
	args := processArgs(t, repo.URL(), ns, kubeconfig)
	r := StartRecond(t, args...)
	cr.wait(t, 50, 2*time.Minute) // the apply is writing
	sent := time.Now()
	r.Signal(syscall.SIGTERM)
	// Kubernetes' grace period is the contract: the kubelet kills at 30 s.
	// The exit takes well under a second (the writes in flight); what
	// shows that it started no further one is the state below, not this.
	code, took := r.Wait(30 * time.Second)
	t.Logf("SIGTERM during the apply: exit %d after %s", code, took.Round(time.Millisecond))
	if code != 0 {
		t.Errorf("exit code after SIGTERM = %d, want 0", code)
	}
	if !strings.Contains(r.Log(), `"msg":"recond stopped"`) {
		t.Errorf("no \"recond stopped\" line: the stop was not graceful")
	}
	tk := r.LastTick()
	t.Logf("last tick: %s", tk)
	if !tk.Failed() || tk.Phase != "apply" {
		t.Errorf("the stopped tick = %s, want failed in apply", tk)
	}
	written := owned(t, ns)
	t.Logf("written before the stop: %d of %d", len(written), n)
	if len(written) == 0 || len(written) >= n {
		t.Fatalf("%d of %d written when stopped: the stop did not fall inside the apply", len(written), n)
	}
	for name, c := range written {
		var i int
		if _, err := fmt.Sscanf(name, "cm-%d", &i); err != nil || c.Data["tag"] != "one" || c.Data["index"] != fmt.Sprint(i) {
			t.Errorf("ConfigMap %s half-written: data %v", name, c.Data)
		}
	}
	// Written before the kind's first object, with the revision still the
	// last one applied in full (none): the next start knows it owns the kind
	// and that the revision is not applied yet.
	if d := cmp.Diff(map[string]string{"kinds": "v1 ConfigMap", "revision": ""}, inventoryOf(t, ns)); d != "" {
		t.Errorf("inventory after the stop (-want +got):\n%s", d)
	}

	restart := time.Now()
	r2 := StartRecond(t, args...)
	d := r2.Recovery("SIGTERM during apply", restart, 0, 2, 2*time.Minute, Converged)
	t.Logf("exit %s after SIGTERM; next start converged %s after it started (%s after the signal)",
		took.Round(time.Millisecond), d.Round(time.Millisecond), time.Since(sent).Round(time.Millisecond))
	checkConverged(t, ns, names(0, n), "one", uids(written), rev, by)
}

// A SIGKILL while a new revision is being written (early, half way, late):
// the revision updates 100 objects, removes 100 and adds 1,200. The killed
// process pruned nothing (prunes run after every write); the next start
// writes the rest, prunes exactly the 100 removed objects once, and leaves
// every object of Git there once, never deleted and recreated, with the
// inventory at the new revision.
func TestFaultProcessSIGKILLDuringApply(t *testing.T) {
	for _, tc := range []struct {
		name string
		at   int // creations of the new revision seen before the kill
	}{
		{"early", 50},
		{"middle", 600},
		{"late", 1100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo, rev1, ns, by := processRow(t, "one", 200)
			args := processArgs(t, repo.URL(), ns, Kubeconfig(t))
			r := StartRecond(t, args...)
			r.WaitTick(time.Minute, 0, Converged)
			before := uids(owned(t, ns))

			files := configMapFiles(0, 100, "two")
			files["bulk/00100.yaml"] = "" // cm-00100..cm-00199 leave Git
			maps.Copy(files, configMapFiles(200, 1400, "two"))
			cr := watchCreations(t, ns)
			rev2 := repo.Commit("two", files)
			cr.wait(t, tc.at, 2*time.Minute)
			if err := syscall.Kill(r.Pid(), syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed := time.Now()
			if code, _ := r.Wait(time.Minute); code != -1 {
				t.Fatalf("exit code %d, want killed (-1)", code)
			}
			live := owned(t, ns)
			created := len(live) - 200
			t.Logf("killed after %d of 1200 creations", created)
			for _, n := range names(0, 200) {
				if _, ok := live[n]; !ok {
					t.Errorf("%s deleted by the killed process before its writes were done", n)
				}
			}
			if d := cmp.Diff(map[string]string{"kinds": "v1 ConfigMap", "revision": rev1}, inventoryOf(t, ns)); d != "" {
				t.Errorf("inventory after the kill (-want +got):\n%s", d)
			}

			restart := time.Now()
			r2 := StartRecond(t, args...)
			d := r2.Recovery("SIGKILL during apply ("+tc.name+")", restart, 0, 2, 2*time.Minute, Converged)
			t.Logf("next start converged %s after it started (%s after the kill)", d.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))
			kept := map[string]types.UID{}
			for n, c := range live {
				kept[n] = c.UID
			}
			for n := range before {
				if _, ok := kept[n]; !ok {
					t.Errorf("%s vanished", n)
				}
			}
			want := append(names(0, 100), names(200, 1400)...)
			checkConverged(t, ns, want, "two", kept, rev2, by)
			pruned := 0
			for _, tk := range r2.Ticks() {
				pruned += int(tk.Num("pruned"))
			}
			if pruned != 100 {
				t.Errorf("the next start pruned %d objects, want the 100 that left Git", pruned)
			}
		})
	}
}

// leaseFlags are short Lease timings for the leader-election rows.
var leaseFlags = []string{"--leader-elect=true", "--leader-elect-lease-duration", "4s",
	"--leader-elect-renew-deadline", "3s", "--leader-elect-retry-period", "1s"}

const leaseDuration, retryPeriod = 4 * time.Second, time.Second

// body is the status code and body of GET path ("" and 0 when the request
// failed).
func body(r *Recond, path string) (int, string) {
	c := http.Client{Timeout: 30 * time.Second}
	resp, err := c.Get(r.Addr + path)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// tickSpan is when a tick started and ended.
func tickSpan(t testing.TB, tk Tick) (time.Time, time.Time) {
	t.Helper()
	d, err := time.ParseDuration(tk.Str("duration"))
	if err != nil {
		t.Fatalf("tick %d duration %q: %v", tk.ID, tk.Str("duration"), err)
	}
	return tk.Time().Add(-d), tk.Time()
}

// Two replicas of one instance; the leader is killed with SIGKILL (it
// cannot release the Lease). The standby takes over once the Lease expires:
// not before (never two writers), and within the attempts (reads of the
// Lease) that the Lease duration and two jittered retry periods leave room
// for. Its /readyz turns from "standby" to "ok" with its first successful
// tick, and it converges the revision the leader had not applied.
func TestFaultProcessLeaderKilled(t *testing.T) {
	repo, _, ns, by := processRow(t, "one", 20)
	kubeconfig := Kubeconfig(t)
	a := StartRecond(t, append(Base(t, repo.URL(), ns, kubeconfig), leaseFlags...)...)
	a.WaitTick(30*time.Second, 0, Converged)
	// The standby goes through a proxy that counts its reads of the Lease:
	// the takeover is bounded in its attempts, not in seconds.
	proxy := apiproxy.Start(t, cp.Config)
	b := StartRecond(t, append(Base(t, repo.URL(), ns, proxy.KubeConfig(t)), leaseFlags...)...)
	b.WaitLine(20*time.Second, func(l Line) bool { return strings.HasPrefix(l.Msg(), "standby:") })
	if code, s := body(b, "/readyz"); code != 200 || !strings.HasPrefix(s, "standby: lease "+reconcile.LeaseName("recond")+" held by ") {
		t.Errorf("standby /readyz = %d %q", code, s)
	}
	time.Sleep(3 * retryPeriod) // the leader ticks, renews; the standby tries
	if n := len(b.Ticks()); n != 0 {
		t.Fatalf("the standby ticked %d times while the leader held the Lease", n)
	}
	rev2 := repo.Commit("two", configMapFiles(0, 40, "two"))
	leases := cp.Client.CoordinationV1().Leases(ns)
	before, err := leases.Get(context.Background(), reconcile.LeaseName("recond"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The standby's attempts from now on (client-go reads the Lease once
	// per attempt, at least a retry period apart), and its takeover (the
	// write of the Lease), held until the attempts are counted.
	leasePath := "/leases/" + reconcile.LeaseName("recond")
	attempts := proxy.Add(apiproxy.Fault{Match: apiproxy.Match{Method: "GET", Path: leasePath, Watch: apiproxy.NoWatch}})
	release := make(chan struct{})
	takeover := proxy.Add(apiproxy.Fault{Match: apiproxy.Match{Method: "PUT", Path: leasePath}, Hold: release, Times: 1})
	if err := syscall.Kill(a.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	a.Wait(time.Minute)
	takeover.WaitHits(t, 1, time.Minute)
	tries := attempts.Hits()
	close(release)
	var readyAt time.Time
	for deadline := killed.Add(minWait); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, s := body(b, "/readyz"); s == "ok\n" {
			readyAt = time.Now()
			break
		}
	}
	if readyAt.IsZero() {
		t.Fatalf("the standby's /readyz never said ok after the leader was killed")
	}
	lead := b.WaitLine(time.Second, func(l Line) bool { return strings.HasPrefix(l.Msg(), "leading:") })
	first := b.WaitTick(30*time.Second, 0, func(Tick) bool { return true })
	firstStart, _ := tickSpan(t, first)
	lastRenew := before.Spec.RenewTime.Time
	t.Logf("leader killed %s after its last observed renewal; standby: leading after %s (attempt %d), first tick (%s) started after %s, /readyz ok after %s",
		killed.Sub(lastRenew).Round(time.Millisecond), lead.Time().Sub(killed).Round(time.Millisecond), tries, first.Outcome,
		firstStart.Sub(killed).Round(time.Millisecond), readyAt.Sub(killed).Round(time.Millisecond))
	// The Lease is microsecond-precise; log times nanosecond.
	if lead.Time().Before(lastRenew.Add(leaseDuration - time.Millisecond)) {
		t.Errorf("the standby took the Lease %s after the leader's renewal, before it expired (%s)", lead.Time().Sub(lastRenew), leaseDuration)
	}
	// The standby sees the leader's last renewal at its next attempt (at
	// most a jittered retry period, 2.2 retry periods, after it), counts
	// the Lease duration from then, and takes the Lease at its first
	// attempt after that (at most another jittered retry period): its
	// attempts since the kill, at least a retry period apart, fit in the
	// Lease duration and two jittered retry periods, plus the first. A busy
	// machine spaces them further, never closer.
	if bound := int((leaseDuration+2*(retryPeriod*22/10))/retryPeriod) + 1; tries > bound {
		t.Errorf("the standby took over at its %d-th attempt after the kill, want within %d", tries, bound)
	}
	_, aEnd := tickSpan(t, a.LastTick())
	if !firstStart.After(aEnd) {
		t.Errorf("the standby's first tick started at %s, before the leader's last tick ended (%s)", firstStart, aEnd)
	}
	after, err := leases.Get(context.Background(), reconcile.LeaseName("recond"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.Spec.HolderIdentity == nil || *after.Spec.HolderIdentity != lead.Str("identity") ||
		*after.Spec.LeaseTransitions != *before.Spec.LeaseTransitions+1 {
		t.Errorf("Lease after the takeover: holder %v, transitions %v (before: %v, %v); want %s, one more",
			after.Spec.HolderIdentity, after.Spec.LeaseTransitions, *before.Spec.HolderIdentity, *before.Spec.LeaseTransitions, lead.Str("identity"))
	}
	b.Recovery("leader killed", killed, 0, 3, 30*time.Second, Converged)
	checkConverged(t, ns, names(0, 40), "two", nil, rev2, by)
}

// secretFiles renders n Secrets s-<i> in one file.
func secretFiles(n int) map[string]string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: s-%d\nstringData:\n  k: v\n", i)
	}
	return map[string]string{"secrets.yaml": b.String()}
}

// ownedSecrets are the UIDs of the Secrets in ns that instance "recond" owns.
func ownedSecrets(t testing.TB, ns string) map[string]types.UID {
	t.Helper()
	sel := labels.SelectorFromSet(labels.Set{reconcile.LabelManagedBy: reconcile.ManagedByValue, reconcile.LabelInstance: "recond"})
	l, err := cp.Client.CoreV1().Secrets(ns).List(context.Background(), metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		t.Fatalf("list owned Secrets: %v", err)
	}
	out := map[string]types.UID{}
	for _, s := range l.Items {
		out[s.Name] = s.UID
	}
	return out
}

// A SIGKILL while the inventory ConfigMap's write is in flight (held by a
// proxy in front of the API server until the process is dead, so it never
// lands). The revision adds a kind (5 Secrets), updates 100 ConfigMaps,
// removes 100 and adds 200. Apply writes the inventory twice: before the
// first object (the kinds it is about to write, the old revision) and at
// the end (the new revision). Killed in the first, nothing of the revision
// is written or pruned; killed in the second, everything is, and only the
// inventory's revision is behind. Either way the next start (without the
// proxy) converges, keeps (adopts) what the killed process created, and
// the 100 removed objects are pruned exactly once in all.
func TestFaultProcessSIGKILLDuringInventoryWrite(t *testing.T) {
	for _, tc := range []struct {
		name string
		// write is which inventory write of the revision is held (1: before
		// the objects, 2: after them).
		write int
	}{
		{"before the objects", 1},
		{"after the objects", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo, rev1, ns, by := processRow(t, "one", 200)
			proxy := apiproxy.Start(t, cp.Config)
			r := StartRecond(t, processArgs(t, repo.URL(), ns, proxy.KubeConfig(t))...)
			r.WaitTick(time.Minute, 0, Converged)
			before := uids(owned(t, ns))

			inventoryWrite := apiproxy.Match{Method: "PATCH", Path: "/configmaps/" + reconcile.InventoryPrefix + "recond"}
			release := make(chan struct{})
			held := proxy.Add(apiproxy.Fault{Match: inventoryWrite, Hold: release, Times: 1})
			files := configMapFiles(0, 100, "two")
			files["bulk/00100.yaml"] = ""
			maps.Copy(files, configMapFiles(200, 400, "two"))
			maps.Copy(files, secretFiles(5))
			rev2 := repo.Commit("two", files)
			held.WaitHits(t, 1, time.Minute)
			if tc.write == 2 {
				// The second write is held from now on; the first goes on.
				first, pass := held, release
				release = make(chan struct{})
				held = proxy.Add(apiproxy.Fault{Match: inventoryWrite, Hold: release, Times: 1})
				first.Remove()
				close(pass)
				held.WaitHits(t, 1, time.Minute)
			}
			if err := syscall.Kill(r.Pid(), syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed := time.Now()
			r.Wait(time.Minute)
			// The held write stays held until the test ends: the proxy drops
			// it once it sees the client gone, so it never lands (released
			// now, it could still be sent before the proxy noticed).
			held.Remove()
			rel := release
			t.Cleanup(func() { close(rel) })
			live := owned(t, ns)
			liveSecrets := ownedSecrets(t, ns)
			inv := inventoryOf(t, ns)
			t.Logf("killed during inventory write %d: %d ConfigMaps, %d Secrets live; inventory %q", tc.write, len(live), len(liveSecrets), inv)
			want := append(names(0, 100), names(200, 400)...)
			switch tc.write {
			case 1:
				if d := cmp.Diff(before, uids(live)); d != "" {
					t.Errorf("ConfigMaps changed though the process died before writing any (-before +after):\n%s", d)
				}
				if len(liveSecrets) != 0 {
					t.Errorf("%d Secrets written before the inventory listed their kind", len(liveSecrets))
				}
				if d := cmp.Diff(map[string]string{"kinds": "v1 ConfigMap", "revision": rev1}, inv); d != "" {
					t.Errorf("inventory after the kill (-want +got):\n%s", d)
				}
			case 2:
				if d := cmp.Diff(want, slices.Sorted(maps.Keys(live))); d != "" {
					t.Errorf("ConfigMaps when killed in the last inventory write (-want +got):\n%s", d)
				}
				if len(liveSecrets) != 5 {
					t.Errorf("%d Secrets live, want 5", len(liveSecrets))
				}
				// The kinds were recorded before the objects; the revision
				// is the last one applied in full.
				if d := cmp.Diff(map[string]string{"kinds": "v1 ConfigMap\nv1 Secret", "revision": rev1}, inv); d != "" {
					t.Errorf("inventory after the kill (-want +got):\n%s", d)
				}
			}

			restart := time.Now()
			r2 := StartRecond(t, processArgs(t, repo.URL(), ns, Kubeconfig(t))...)
			d := r2.Recovery("SIGKILL during inventory write "+fmt.Sprint(tc.write), restart, 0, 2, 2*time.Minute, Converged)
			t.Logf("next start converged %s after it started (%s after the kill)", d.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))
			checkConvergedKinds(t, ns, want, "two", uids(live), "v1 ConfigMap\nv1 Secret", rev2, by)
			if got := ownedSecrets(t, ns); len(got) != 5 {
				t.Errorf("%d Secrets after convergence, want 5", len(got))
			} else if tc.write == 2 {
				if d := cmp.Diff(liveSecrets, got); d != "" {
					t.Errorf("Secrets the killed process created were replaced (-before +after):\n%s", d)
				}
			}
			pruned := 0
			for _, tk := range r2.Ticks() {
				pruned += int(tk.Num("pruned"))
			}
			// What the killed process pruned, plus what the next start did.
			killedPruned := 0
			for _, n := range names(100, 200) {
				if _, ok := live[n]; !ok {
					killedPruned++
				}
			}
			if pruned+killedPruned != 100 {
				t.Errorf("pruned %d (killed process) + %d (next start), want 100 in all", killedPruned, pruned)
			}
		})
	}
}

// bigFiles renders n ConfigMaps big-<i>, one per file, each of about size
// bytes of data.
func bigFiles(n, size int) map[string]string {
	files := map[string]string{}
	for i := range n {
		var b strings.Builder
		fmt.Fprintf(&b, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big-%d\ndata:\n  blob: \"", i)
		for b.Len() < size {
			fmt.Fprintf(&b, "%08x", (i*7919+b.Len())*2654435761)
		}
		b.WriteString("\"\n")
		files[fmt.Sprintf("big/%03d.yaml", i)] = b.String()
	}
	return files
}

// vm is the process's peak virtual size and peak resident set, as
// /proc/PID/status says.
func vm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmPeak") || strings.HasPrefix(l, "VmHWM") {
			out = append(out, strings.Join(strings.Fields(l), " "))
		}
	}
	return strings.Join(out, ", ")
}

// memoryCap is the memory cap of TestFaultProcessMemoryCap, as a memory
// cgroup sets it for a container (memory.limit_in_bytes, or memory.max):
// page cache is reclaimed under it, resident memory is not. Measured on
// linux/amd64: recond idles at ~60 MB resident; a 180 MB commit refused by
// the default render limits peaks at ~210 MB, the same commit with
// --render-max-bytes raised at ~455 MB.
const memoryCap = 320 << 20

// addressSpaceCap is the cap used instead (RLIMIT_AS, with prlimit) where no
// memory cgroup can be made: recond idles at ~1.8 GB of virtual size, the
// refused commit peaks at ~2.04 GB, the raised one at ~2.24 GB (thin
// margins: the cgroup is the better test).
const addressSpaceCap = 2200 << 20

// capMemory puts the running process pid under a memory cap: a memory cgroup
// of its own (v1 or v2) if one can be made, else RLIMIT_AS through prlimit.
// It returns what it did; it skips the test when it can do neither.
func capMemory(t *testing.T, pid int) string {
	t.Helper()
	name := fmt.Sprintf("recond-faults-%d", pid)
	for _, c := range []struct{ root, limit string }{
		{"/sys/fs/cgroup/memory", "memory.limit_in_bytes"}, // v1
		{"/sys/fs/cgroup", "memory.max"},                   // v2
	} {
		dir := filepath.Join(c.root, name)
		if _, err := os.Stat(filepath.Join(c.root, "cgroup.procs")); err != nil {
			continue
		}
		if err := os.Mkdir(dir, 0o755); err != nil {
			continue
		}
		if os.WriteFile(filepath.Join(dir, c.limit), []byte(fmt.Sprint(memoryCap)), 0o644) != nil ||
			os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(fmt.Sprint(pid)), 0o644) != nil {
			_ = os.Remove(dir)
			continue
		}
		t.Cleanup(func() {
			// Back to the parent (if still running), then gone.
			_ = os.WriteFile(filepath.Join(c.root, "cgroup.procs"), []byte(fmt.Sprint(pid)), 0o644)
			_ = os.Remove(dir)
		})
		return fmt.Sprintf("memory cgroup %s, %s = %d MB", dir, c.limit, memoryCap>>20)
	}
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("no memory cgroup and no prlimit (util-linux) to cap recond's memory")
	}
	limit := fmt.Sprint(addressSpaceCap)
	if out, err := exec.Command(prlimit, "--pid", fmt.Sprint(pid), "--as="+limit+":"+limit).CombinedOutput(); err != nil {
		t.Skipf("prlimit --as on recond: %v: %s", err, out)
	}
	return fmt.Sprintf("RLIMIT_AS = %d MB", addressSpaceCap>>20)
}

// recond under a memory cap (a memory cgroup, as a container's limit; or
// RLIMIT_AS) and a commit of 180 MB (60 files of 3 MB) on top of 20 applied
// ConfigMaps. With the default render limits the render stops at 64 MB;
// with --render-max-bytes raised the same commit exceeds the cap, in the
// render binary, a process of its own that the kernel kills first (OOM
// score 1000) or whose own limit stops it: either way recond stays alive
// within the cap, the tick fails in read (invalid) and nothing is touched,
// and a commit without the big files converges with the 20 objects never
// recreated.
func TestFaultProcessMemoryCap(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags []string
	}{
		{"default render limits", nil},
		{"render-max-bytes raised", []string{"--render-max-bytes", "1000000000"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo, _, ns, by := processRow(t, "one", 20)
			args := processArgs(t, repo.URL(), ns, Kubeconfig(t), tc.flags...)
			r := StartRecond(t, args...)
			how := capMemory(t, r.Pid())
			last := r.WaitTick(time.Minute, 0, Converged)
			before := uids(owned(t, ns))
			t.Logf("converged under the cap (%s): %s", how, vm(r.Pid()))

			bigAt := time.Now()
			repo.Commit("big", bigFiles(60, 3<<20))
			tk := r.WaitTick(2*time.Minute, last.ID, Tick.Failed)
			peak := vm(r.Pid())
			t.Logf("under the cap: %s (%s after the commit); %s", tk, tk.Time().Sub(bigAt).Round(time.Millisecond), peak)
			if !(tk.Phase == "read" && tk.Reason == "invalid") {
				t.Errorf("tick of the big commit = %s, want failed in read, reason invalid (a render limit, or the render binary killed)", tk)
			}
			if v := r.Metric("recond_phase_failures_total", map[string]string{"phase": "read", "reason": "invalid"}); v < 1 {
				t.Errorf("recond_phase_failures_total{phase=read,reason=invalid} = %v, want at least 1", v)
			}
			if d := cmp.Diff(before, uids(owned(t, ns))); d != "" {
				t.Errorf("objects changed by the refused commit (-before +after):\n%s", d)
			}

			files := map[string]string{}
			for name := range bigFiles(60, 0) {
				files[name] = ""
			}
			maps.Copy(files, configMapFiles(0, 20, "two"))
			fixed := time.Now()
			rev := repo.Commit("small again", files)
			// Bound 3: the tick in flight at the fix renders the big
			// commit for seconds, then two ticks.
			r.Recovery("memory cap ("+tc.name+")", fixed, tk.ID, 3, time.Minute, func(tk Tick) bool {
				return tk.Outcome == "applied" && tk.Str("revision") == rev[:12]
			})
			r.WaitTick(time.Minute, tk.ID, Converged)
			checkConverged(t, ns, names(0, 20), "two", before, rev, by)
		})
	}
}
