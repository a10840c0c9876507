package leader_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/leader"
)

var cp *testenv.ControlPlane

func TestMain(m *testing.M) { os.Exit(testenv.RunTests(m, &cp)) }

// Two processes of one instance: exactly one leads, the other says it is
// standby and who holds the Lease; when the leader stops, the standby takes
// over within the lease duration, and the two never lead at once.
func TestOneLeaderStandbyTakesOver(t *testing.T) {
	r := newRace(t, "recond-leader-x")
	a := r.campaign("a")
	waitFor(t, "a leads", 10*time.Second, a.leading.Load)
	b := r.campaign("b")
	waitFor(t, "b reports standby", 10*time.Second, func() bool {
		s := b.lastState()
		return !s.Leading && s.Holder == "a"
	})
	time.Sleep(2 * time.Second) // several renewals: b must stay standby
	if b.leading.Load() {
		t.Fatal("b leads while a holds the lease")
	}

	a.cancel()
	if err := returned(t, "a", a.done, 30*time.Second); err != nil {
		t.Fatalf("a stopped with %v", err)
	}
	took := waitFor(t, "b takes over", 10*time.Second, b.leading.Load)
	t.Logf("standby took over %s after the leader stopped (lease released on stop)", took.Round(10*time.Millisecond))
	if r.overlap.Load() {
		t.Error("two processes led at once")
	}
	if lease := getLease(t, r.ns, r.lease); lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != "b" {
		t.Errorf("lease holder %v, want b", lease.Spec.HolderIdentity)
	}
}

// A leader that stops renewing (its process hangs or is cut off) loses the
// Lease after the renew deadline, stops leading and says so with ErrLost;
// a standby takes over once the lease duration has passed.
func TestLostLeaseStopsTheLeader(t *testing.T) {
	r := newRace(t, "recond-leader-y")
	a := r.campaign("a")
	waitFor(t, "a leads", 10*time.Second, a.leading.Load)
	// Someone else takes the Lease by force (as an expired holder would
	// find it): a cannot renew and must stop.
	lease := getLease(t, r.ns, r.lease)
	other := "intruder"
	lease.Spec.HolderIdentity = &other
	if _, err := cp.Client.CoordinationV1().Leases(r.ns).Update(context.Background(), lease, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := returned(t, "the leader after losing its lease", a.done, 15*time.Second); !errors.Is(err, leader.ErrLost) {
		t.Fatalf("leader stopped with %v, want ErrLost", err)
	}
	if a.leading.Load() {
		t.Error("lead still running after Run returned")
	}
}
