package faults

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/internal/testenv/apiproxy"
	"recond.dev/recond/reconcile"
)

// write is one write of a ConfigMap cm-*, as a watch saw it (in the API
// server's order), and whose it was (its tag: each process has its own
// repository).
type write struct {
	name, tag string
	at        time.Time
}

// recordWrites watches the ConfigMaps of ns and records every added or
// modified cm-* in order, until the test ends.
func recordWrites(t *testing.T, ns string) func() []write {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := cp.Client.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu  sync.Mutex
		out []write
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			c, ok := ev.Object.(*corev1.ConfigMap)
			if !ok || (ev.Type != watch.Added && ev.Type != watch.Modified) || !strings.HasPrefix(c.Name, "cm-") {
				continue
			}
			mu.Lock()
			out = append(out, write{name: c.Name, tag: c.Data["tag"], at: time.Now()})
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		w.Stop()
		<-done
	})
	return func() []write {
		mu.Lock()
		defer mu.Unlock()
		return append([]write(nil), out...)
	}
}

// TestFaultProcessLeaseDeleted: two processes of one instance, each with
// its own repository (tags "a" and "b"). A leads and writes a large wave
// (40 ConfigMaps, each request delayed 300 ms by a proxy in front of A,
// two at a time); B waits as standby. The Lease is deleted in the middle of
// A's wave, and the two race to create it again (A's creates are slowed, so
// B wins, as in the case reported). A sees the deletion
// through its watch of the Lease and writes nothing more: its tick fails in
// apply with reason conflict, and it exits 1 to come back as standby. B,
// which never saw the old holder's term expire, waits a lease duration
// before its first write (or, if A created the Lease again first, takes it
// once that expires). A watch on the ConfigMaps sees no write of A after
// B's first.
func TestFaultProcessLeaseDeleted(t *testing.T) {
	ns := cp.Namespace(t)
	by := bystander(t, ns)
	repoA, repoB := testenv.NewRepo(t), testenv.NewRepo(t)
	repoA.Commit("a", configMapFiles(0, 40, "a"))
	revB := repoB.Commit("b", configMapFiles(0, 40, "b"))
	writes := recordWrites(t, ns)

	proxy := apiproxy.Start(t, cp.Config)
	proxy.Add(apiproxy.Fault{Match: apiproxy.Match{Method: "PATCH", Path: "/configmaps/cm-"}, Delay: 300 * time.Millisecond})
	// A's creates of the Lease are slow: B wins the race to create it
	// again, as in the case reported (either way, no two writers).
	proxy.Add(apiproxy.Fault{Match: apiproxy.Match{Method: "POST", Path: "/leases"}, Delay: 3 * time.Second})
	a := StartRecond(t, append(Base(t, repoA.URL(), ns, proxy.KubeConfig(t)), append(leaseFlags, "--apply-concurrency", "2")...)...)
	a.WaitLine(30*time.Second, func(l Line) bool { return strings.HasPrefix(l.Msg(), "leading:") })
	b := StartRecond(t, append(Base(t, repoB.URL(), ns, Kubeconfig(t)), leaseFlags...)...)
	b.WaitLine(30*time.Second, func(l Line) bool { return strings.HasPrefix(l.Msg(), "standby:") })

	// Mid-wave: A has written some of its 40 objects.
	byA := func() int {
		n := 0
		for _, w := range writes() {
			if w.tag == "a" {
				n++
			}
		}
		return n
	}
	for deadline := time.Now().Add(time.Minute); byA() < 4; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("A wrote %d objects in a minute", byA())
		}
	}
	if err := cp.Client.CoordinationV1().Leases(ns).Delete(context.Background(), reconcile.LeaseName("recond"), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()

	code, _ := a.Wait(time.Minute)
	if code != 1 {
		t.Errorf("A exited %d after losing the Lease, want 1 (a restart rejoins as standby)", code)
	}
	lost := a.WaitLine(time.Second, func(l Line) bool { return l.Msg() == "leadership lost: no more writes" })
	if !strings.Contains(lost.Str("reason"), "deleted") {
		t.Errorf("A lost the Lease because %q, want the deletion", lost.Str("reason"))
	}
	if last := a.LastTick(); !FailedIn("apply", "conflict")(last) {
		t.Errorf("A's last tick: %s, want failed in apply, reason conflict", last)
	}
	b.Recovery("lease deleted", deleted, 0, 1, time.Minute, Succeeded)
	checkConverged(t, ns, names(0, 40), "b", nil, revB, by)

	// The order of the writes, as the API server made them.
	ws := writes()
	firstB := -1
	for i, w := range ws {
		if w.tag == "b" {
			firstB = i
			break
		}
	}
	if firstB < 0 {
		t.Fatal("no write of B seen")
	}
	var lastA write
	nA := 0
	for i, w := range ws {
		if w.tag != "a" {
			continue
		}
		nA++
		lastA = w
		if i > firstB {
			t.Errorf("A wrote %s after B's first write (%s)", w.name, ws[firstB].name)
		}
	}
	how := "A created the Lease again first; B took it once that expired"
	if b.Log() != "" && strings.Contains(b.Log(), "holding the lease, which was deleted and created again") {
		how = "B created the Lease again and waited a lease duration"
	}
	t.Logf("%s; A wrote %d of 40 objects, its last %s after the deletion; B's first write %s after the deletion",
		how, nA, lastA.at.Sub(deleted).Round(time.Millisecond), ws[firstB].at.Sub(deleted).Round(time.Millisecond))
}
