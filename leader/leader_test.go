package leader_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/leader"
)

var cp *testenv.ControlPlane

func TestMain(m *testing.M) { os.Exit(testenv.RunTests(m, &cp)) }

// campaigner is one process campaigning for a Lease in a test.
type campaigner struct {
	id      string
	cancel  context.CancelFunc
	done    chan error
	leading atomic.Bool
	// writing is set while lead runs: two campaigners must never both be.
	mu     sync.Mutex
	states []leader.State
}

func campaign(t *testing.T, ns, lease, id string, writers *atomic.Int32, overlap *atomic.Bool) *campaigner {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c := &campaigner{id: id, cancel: cancel, done: make(chan error, 1)}
	cfg := leader.Config{Namespace: ns, Lease: lease, Identity: id,
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond}
	go func() {
		c.done <- leader.Run(ctx, cfg, cp.Client.CoordinationV1(), slog.New(slog.DiscardHandler),
			func(s leader.State) {
				c.mu.Lock()
				c.states = append(c.states, s)
				c.mu.Unlock()
			},
			func(ctx context.Context) {
				if writers.Add(1) > 1 {
					overlap.Store(true)
				}
				c.leading.Store(true)
				<-ctx.Done()
				// The loop finishes the object it is writing after being
				// stopped; the Lease must not be released before.
				time.Sleep(300 * time.Millisecond)
				c.leading.Store(false)
				writers.Add(-1)
			})
	}()
	t.Cleanup(func() { cancel(); <-c.done })
	return c
}

func (c *campaigner) lastState() leader.State {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.states) == 0 {
		return leader.State{}
	}
	return c.states[len(c.states)-1]
}

func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < within {
		if cond() {
			return time.Since(start)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s", what, within)
	return 0
}

// Two processes of one instance: exactly one leads, the other says it is
// standby and who holds the Lease; when the leader stops, the standby takes
// over within the lease duration, and the two never lead at once.
func TestOneLeaderStandbyTakesOver(t *testing.T) {
	cp.Require(t)
	ns := cp.Namespace(t)
	var writers atomic.Int32
	var overlap atomic.Bool
	a := campaign(t, ns, "recond-leader-x", "a", &writers, &overlap)
	waitFor(t, "a leads", 10*time.Second, a.leading.Load)
	b := campaign(t, ns, "recond-leader-x", "b", &writers, &overlap)
	waitFor(t, "b reports standby", 10*time.Second, func() bool {
		s := b.lastState()
		return !s.Leading && s.Holder == "a"
	})
	time.Sleep(2 * time.Second) // several renewals: b must stay standby
	if b.leading.Load() {
		t.Fatal("b leads while a holds the lease")
	}

	a.cancel()
	if err := <-a.done; err != nil {
		t.Fatalf("a stopped with %v", err)
	}
	a.done <- nil // for the cleanup
	took := waitFor(t, "b takes over", 10*time.Second, b.leading.Load)
	t.Logf("standby took over %s after the leader stopped (lease released on stop)", took.Round(10*time.Millisecond))
	if overlap.Load() {
		t.Error("two processes led at once")
	}
	lease, err := cp.Client.CoordinationV1().Leases(ns).Get(context.Background(), "recond-leader-x", metavOpts)
	if err != nil {
		t.Fatal(err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != "b" {
		t.Errorf("lease holder %v, want b", lease.Spec.HolderIdentity)
	}
}

// A leader that stops renewing (its process hangs or is cut off) loses the
// Lease after the renew deadline, stops leading and says so with ErrLost;
// a standby takes over once the lease duration has passed.
func TestLostLeaseStopsTheLeader(t *testing.T) {
	cp.Require(t)
	ns := cp.Namespace(t)
	var writers atomic.Int32
	var overlap atomic.Bool
	a := campaign(t, ns, "recond-leader-y", "a", &writers, &overlap)
	waitFor(t, "a leads", 10*time.Second, a.leading.Load)
	// Someone else takes the Lease by force (as an expired holder would
	// find it): a cannot renew and must stop.
	lease, err := cp.Client.CoordinationV1().Leases(ns).Get(context.Background(), "recond-leader-y", metavOpts)
	if err != nil {
		t.Fatal(err)
	}
	other := "intruder"
	lease.Spec.HolderIdentity = &other
	if _, err := cp.Client.CoordinationV1().Leases(ns).Update(context.Background(), lease, metavUpdate); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-a.done:
		if !errors.Is(err, leader.ErrLost) {
			t.Fatalf("leader stopped with %v, want ErrLost", err)
		}
		a.done <- nil
	case <-time.After(15 * time.Second):
		t.Fatal("the leader kept leading after losing its lease")
	}
	if a.leading.Load() {
		t.Error("lead still running after Run returned")
	}
}

var (
	metavOpts   = metav1.GetOptions{}
	metavUpdate = metav1.UpdateOptions{}
)
