package leader_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	const name = "recond-leader-c"
	p := proxiedLease(t, name)
	ns, client, writes := p.ns, p.client, p.writes
	leases := cp.Client.CoordinationV1().Leases(ns)

	// The pod before held it for an hour from now, and is gone.
	holdLease(t, ns, name, "gone", 3600)
	claimAs := func(id string) leader.Config {
		cfg := quick(ns, name, id)
		cfg.Mode = leader.ModeClaim
		return cfg
	}
	ea := elect(t, claimAs("a"), client, nil)
	actx := ea.lead(t, 20*time.Second)
	if err := ea.e.MayWrite(); err != nil {
		t.Fatalf("the claimant may not write: %v", err)
	}
	if got := *getLease(t, ns, name).Spec.HolderIdentity; got != "a" {
		t.Fatalf("the Lease is held by %q, want a", got)
	}
	claimed := writes.Hits()

	// A process renewing its own Lease beside it: three renewals.
	ref := elect(t, quick(ns, "recond-leader-ref", "ref"), cp.Client, nil)
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
	eb := elect(t, claimAs("b"), client, nil)
	eb.lead(t, 20*time.Second)
	ended(t, "the first claimant, another having claimed the Lease", actx, 20*time.Second)
	if err := ea.e.MayWrite(); !errors.Is(err, leader.ErrNotWriter) || !strings.Contains(err.Error(), "held by b") {
		t.Errorf("MayWrite of the first claimant = %v, want ErrNotWriter naming b", err)
	}
	if err := returned(t, "the first claimant, its Lease claimed by another", ea.done, 20*time.Second); !errors.Is(err, leader.ErrLost) || !strings.Contains(err.Error(), "replicas: 1") {
		t.Errorf("Run returned %v, want ErrLost with the advice", err)
	}
	if err := eb.e.MayWrite(); err != nil {
		t.Errorf("the second claimant may not write: %v", err)
	}
}
