package faults

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"recond.dev/recond/internal/testenv/apiproxy"
	"recond.dev/recond/reconcile"
)

// TestFaultProcessClaimantKilled: a process holding the Lease with
// --leader-elect-mode=claim is killed (SIGKILL: it cannot release it).
// Its claim (--leader-elect-claim-duration, 12 s here; 10m by default) is
// renewed every third of it while it lives, so the Lease says when it was
// last renewed. `recond sync` run once the renewal is overdue says the
// truth: the holder has most likely stopped, and when its claim ends
// (exit 1, nothing done). A process in renew mode (a second replica's
// setting), started as standby, takes the Lease over when the claim ends,
// with no one deleting it, and ticks. Before, the claim was written for a
// year and never renewed: the standby waited for ever (Ready, no tick) and
// sync said the dead holder ticked on its own.
func TestFaultProcessClaimantKilled(t *testing.T) {
	repo, _, ns, by := processRow(t, "one", 10)
	kubeconfig := Kubeconfig(t)
	const claimFor = 12 * time.Second
	claimFlags := append(append([]string(nil), leaseFlags...), "--leader-elect-mode", "claim", "--leader-elect-claim-duration", claimFor.String())
	a := StartRecond(t, append(Base(t, repo.URL(), ns, kubeconfig), claimFlags...)...)
	a.WaitTick(30*time.Second, 0, Converged)
	leases := cp.Client.CoordinationV1().Leases(ns)
	name := reconcile.LeaseName("recond")
	claimed, err := leases.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := *claimed.Spec.LeaseDurationSeconds; got != int32(claimFor/time.Second) {
		t.Errorf("the claim's term is %ds, want %s", got, claimFor)
	}
	// It renews while it lives: a third of the claim apart.
	renewed := claimed
	for deadline := time.Now().Add(time.Minute); renewed.Spec.RenewTime.Equal(claimed.Spec.RenewTime); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the claimant did not renew its claim within a minute")
		}
		if renewed, err = leases.Get(context.Background(), name, metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Kill(a.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	a.Wait(time.Minute)
	final, err := leases.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lastRenewal := final.Spec.RenewTime.Time
	holder := *final.Spec.HolderIdentity

	// Once the renewal is overdue (half the claim), sync says so.
	if wait := time.Until(lastRenewal.Add(claimFor/2 + 500*time.Millisecond)); wait > 0 {
		time.Sleep(wait)
	}
	sync := StartRecond(t, "sync", "--repo", repo.URL(), "--namespace", ns, "--kubeconfig", kubeconfig, "--log-format", "json",
		"--cache-dir", t.TempDir(), "--leader-elect=true", "--leader-elect-lease-duration", "4s",
		"--leader-elect-renew-deadline", "3s", "--leader-elect-retry-period", "1s")
	if code, _ := sync.Wait(time.Minute); code != 1 {
		t.Errorf("recond sync exited %d while the dead claimant's term ran, want 1", code)
	}
	said := sync.WaitLine(time.Second, func(l Line) bool { return l.Str("level") == "ERROR" })
	if !strings.Contains(said.Msg(), "has not renewed it") || said.Str("holder") != holder || said.Str("expires") == "" {
		t.Errorf("recond sync said %q (holder %q, expires %q); want that %s has not renewed it, and when it expires",
			said.Msg(), said.Str("holder"), said.Str("expires"), holder)
	}
	if len(sync.Ticks()) != 0 {
		t.Error("recond sync ticked while the dead claimant's term ran")
	}

	rev2 := repo.Commit("two", configMapFiles(0, 20, "two"))
	proxy := apiproxy.Start(t, cp.Config)
	attempts := proxy.Add(apiproxy.Fault{Match: apiproxy.Match{Method: "GET", Path: "/leases/" + name, Watch: apiproxy.NoWatch}})
	b := StartRecond(t, append(Base(t, repo.URL(), ns, proxy.KubeConfig(t)), leaseFlags...)...)
	lead := b.WaitLine(time.Minute, func(l Line) bool { return strings.HasPrefix(l.Msg(), "leading:") })
	tries := attempts.Hits()
	t.Logf("claimant killed %s after its last renewal; the renewing process leads %s after the kill (%s after the renewal), at its %d-th attempt",
		killed.Sub(lastRenewal).Round(time.Millisecond), lead.Time().Sub(killed).Round(time.Millisecond),
		lead.Time().Sub(lastRenewal).Round(time.Millisecond), tries)
	if lead.Time().Before(lastRenewal.Add(claimFor - time.Millisecond)) {
		t.Errorf("the Lease was taken %s after the claimant's last renewal, before its claim ended (%s)", lead.Time().Sub(lastRenewal), claimFor)
	}
	// The standby counts the claim from its first reading of the Lease
	// (after the kill) and takes it at its first attempt after that: its
	// attempts, at least a retry period apart, fit in the claim and two
	// jittered retry periods, plus the first.
	if bound := int((claimFor+2*(retryPeriod*22/10))/retryPeriod) + 1; tries > bound {
		t.Errorf("the renewing process took over at its %d-th attempt, want within %d", tries, bound)
	}
	b.Recovery("claimant killed", killed, 0, 3, time.Minute, Converged)
	checkConverged(t, ns, names(0, 20), "two", nil, rev2, by)
}
