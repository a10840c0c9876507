package leader_test

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"recond.dev/recond/internal/testenv/apiproxy"
	"recond.dev/recond/leader"
)

// quick is the timing of most tests' elections: a lease of 3 s, renewed
// every half second and given up 2 s after the last renewal.
func quick(ns, lease, id string) leader.Config {
	return leader.Config{Namespace: ns, Lease: lease, Identity: id,
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond}
}

// proxied is a test's namespace and a fault proxy to the API server that
// counts the writes (PUT) of one Lease.
type proxied struct {
	ns     string
	proxy  *apiproxy.Proxy
	client kubernetes.Interface // through the proxy
	writes *apiproxy.Fault
}

// proxiedLease is a proxied namespace for the Lease name.
func proxiedLease(t *testing.T, name string) proxied {
	t.Helper()
	cp.Require(t)
	p := proxied{ns: cp.Namespace(t), proxy: apiproxy.Start(t, cp.Config)}
	p.client = kubernetes.NewForConfigOrDie(p.proxy.RESTConfig())
	p.writes = p.proxy.Add(apiproxy.Fault{Match: apiproxy.Match{Method: "PUT", Path: "/leases/" + name}})
	return p
}

// holdLease creates the Lease name in ns held by holder for secs from now,
// as a process gone without releasing it leaves it.
func holdLease(t *testing.T, ns, name, holder string, secs int32) {
	t.Helper()
	now := metav1.NewMicroTime(time.Now())
	if _, err := cp.Client.CoordinationV1().Leases(ns).Create(context.Background(), &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: coordv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// getLease reads the Lease name in ns.
func getLease(t *testing.T, ns, name string) *coordv1.Lease {
	t.Helper()
	l, err := cp.Client.CoordinationV1().Leases(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// returned waits up to within for what Run returned on done, and puts it
// back for the cleanup; what names the process.
func returned(t *testing.T, what string, done chan error, within time.Duration) error {
	t.Helper()
	select {
	case err := <-done:
		done <- err
		return err
	case <-time.After(within):
		t.Fatalf("%s: Run did not return within %s", what, within)
	}
	return nil
}

// ended waits up to within for ctx, a lead's context, to end; what says
// whose.
func ended(t *testing.T, what string, ctx context.Context, within time.Duration) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(within):
		t.Fatalf("%s: still leading after %s", what, within)
	}
}

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

// race is the processes campaigning for one Lease in one namespace, which
// must never lead at once.
type race struct {
	t         *testing.T
	ns, lease string
	writers   atomic.Int32 // how many lead now
	overlap   atomic.Bool  // set once two led at once
}

func newRace(t *testing.T, lease string) *race {
	cp.Require(t)
	return &race{t: t, ns: cp.Namespace(t), lease: lease}
}

// campaign starts the process id campaigning with leader.Run.
func (r *race) campaign(id string) *campaigner {
	t, writers, overlap := r.t, &r.writers, &r.overlap
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c := &campaigner{id: id, cancel: cancel, done: make(chan error, 1)}
	cfg := quick(r.ns, r.lease, id)
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

// elected is one Elector running in a test: its lead contexts and states.
type elected struct {
	e      *leader.Elector
	leads  chan context.Context
	done   chan error
	mu     sync.Mutex
	states []leader.State
}

func elect(t *testing.T, cfg leader.Config, client kubernetes.Interface, log *slog.Logger) *elected {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	el := &elected{e: leader.New(cfg, client.CoordinationV1(), log), leads: make(chan context.Context, 4), done: make(chan error, 1)}
	go func() {
		el.done <- el.e.Run(ctx, func(s leader.State) {
			el.mu.Lock()
			el.states = append(el.states, s)
			el.mu.Unlock()
		}, func(ctx context.Context) {
			el.leads <- ctx
			<-ctx.Done()
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-el.done:
		case <-time.After(30 * time.Second):
			t.Error("Run did not return")
		}
	})
	return el
}

// state returns the first state that ok accepts, waiting up to within.
func (el *elected) state(t *testing.T, what string, within time.Duration, ok func(leader.State) bool) leader.State {
	t.Helper()
	var got leader.State
	waitFor(t, what, within, func() bool {
		el.mu.Lock()
		defer el.mu.Unlock()
		for _, s := range el.states {
			if ok(s) {
				got = s
				return true
			}
		}
		return false
	})
	return got
}

func (el *elected) lead(t *testing.T, within time.Duration) context.Context {
	t.Helper()
	select {
	case ctx := <-el.leads:
		return ctx
	case err := <-el.done:
		t.Fatalf("Run returned %v before leading", err)
	case <-time.After(within):
		t.Fatalf("not leading within %s", within)
	}
	return nil
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
