package leader_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"recond.dev/recond/internal/testenv/apiproxy"
	"recond.dev/recond/leader"
)

// With ModeClaim a process takes the Lease at once from a holder whose
// term has not ended (the pod it replaced, gone without releasing it),
// then makes no request on the Lease for a third of its claim (ten minutes
// by default): a process renewing another Lease beside it renews three
// times meanwhile. A second process
// that claims the Lease stops the first one's writes (its watch sees the
// claim), which returns ErrLost saying why; a clean stop releases the
// Lease.
func TestClaimTakesTheLeaseAtOnceAndRenewsRarely(t *testing.T) {
	cp.Require(t)
	ns := cp.Namespace(t)
	proxy := apiproxy.Start(t, cp.Config)
	const name = "recond-leader-c"
	writes := proxy.Add(apiproxy.Fault{Match: apiproxy.Match{Method: "PUT", Path: "/leases/" + name}})
	client := kubernetes.NewForConfigOrDie(proxy.RESTConfig())
	leases := cp.Client.CoordinationV1().Leases(ns)

	// The pod before held it for an hour from now, and is gone.
	holder, secs, now := "gone", int32(3600), metav1.NewMicroTime(time.Now())
	if _, err := leases.Create(context.Background(), &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: coordv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	claim := leader.Config{Namespace: ns, Lease: name, Mode: leader.ModeClaim,
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond}
	a := claimWith(claim, "a")
	ea := elect(t, a, client, nil)
	actx := ea.lead(t, 20*time.Second)
	if err := ea.e.MayWrite(); err != nil {
		t.Fatalf("the claimant may not write: %v", err)
	}
	l, err := leases.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := *l.Spec.HolderIdentity; got != "a" {
		t.Fatalf("the Lease is held by %q, want a", got)
	}
	claimed := writes.Hits()

	// A process renewing its own Lease beside it: three renewals.
	ref := elect(t, leader.Config{Namespace: ns, Lease: "recond-leader-ref", Identity: "ref",
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond}, cp.Client, nil)
	ref.lead(t, 20*time.Second)
	refRenewals := 0
	last := ""
	waitFor(t, "three renewals of another Lease", 60*time.Second, func() bool {
		rl, err := leases.Get(context.Background(), "recond-leader-ref", metav1.GetOptions{})
		if err == nil && rl.ResourceVersion != last {
			last = rl.ResourceVersion
			refRenewals++
		}
		return refRenewals > 3
	})
	if n := writes.Hits() - claimed; n != 0 {
		t.Errorf("the claimed Lease was written %d time(s) while its holder led", n)
	}
	if err := ea.e.MayWrite(); err != nil {
		t.Errorf("the claimant may not write after a while without renewals: %v", err)
	}

	// A second process claims it: the first stops writing.
	eb := elect(t, claimWith(claim, "b"), client, nil)
	eb.lead(t, 20*time.Second)
	select {
	case <-actx.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the first claimant still leads 20 s after another claimed the Lease")
	}
	if err := ea.e.MayWrite(); !errors.Is(err, leader.ErrNotWriter) || !strings.Contains(err.Error(), "held by b") {
		t.Errorf("MayWrite of the first claimant = %v, want ErrNotWriter naming b", err)
	}
	select {
	case err := <-ea.done:
		if !errors.Is(err, leader.ErrLost) || !strings.Contains(err.Error(), "replicas: 1") {
			t.Errorf("Run returned %v, want ErrLost with the advice", err)
		}
		ea.done <- err
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after the Lease was claimed by another")
	}
	if err := eb.e.MayWrite(); err != nil {
		t.Errorf("the second claimant may not write: %v", err)
	}
}

func claimWith(cfg leader.Config, id string) leader.Config {
	cfg.Identity = id
	return cfg
}
