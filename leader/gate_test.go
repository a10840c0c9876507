package leader_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/internal/testenv/apiproxy"
	"recond.dev/recond/leader"
)

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

// A leader whose Lease is deleted stops writing at once: its watch sees
// the deletion, MayWrite refuses and lead's context ends before the
// election has tried to renew again (renewals are 10 s apart here, so only
// the watch can have seen it), and Run returns ErrLost. A Lease this
// process never saw before is taken without waiting.
func TestDeletedLeaseStopsTheWriterAtOnce(t *testing.T) {
	cp.Require(t)
	ns := cp.Namespace(t)
	proxy := apiproxy.Start(t, cp.Config)
	renewals := proxy.Add(apiproxy.Fault{Match: apiproxy.Match{Method: "PUT", Path: "/leases/"}})
	client := kubernetes.NewForConfigOrDie(proxy.RESTConfig())
	const name = "recond-leader-w"
	a := elect(t, leader.Config{Namespace: ns, Lease: name, Identity: "a",
		LeaseDuration: 40 * time.Second, RenewDeadline: 30 * time.Second, RetryPeriod: 10 * time.Second}, client, nil)
	lctx := a.lead(t, 20*time.Second)
	if err := a.e.MayWrite(); err != nil {
		t.Fatalf("the leader may not write: %v", err)
	}
	a.mu.Lock()
	for _, s := range a.states {
		if !s.WaitUntil.IsZero() {
			t.Errorf("a Lease never seen before was taken with a wait: %+v", s)
		}
	}
	a.mu.Unlock()
	// The first renewal follows the acquisition at once; the next is a
	// retry period later. Delete the Lease in between.
	leases := cp.Client.CoordinationV1().Leases(ns)
	waitFor(t, "the first renewal", 20*time.Second, func() bool {
		l, err := leases.Get(context.Background(), name, metav1.GetOptions{})
		return err == nil && !l.Spec.RenewTime.Equal(l.Spec.AcquireTime)
	})
	before := renewals.Hits()
	if err := leases.Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lctx.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("lead's context still running 20 s after the Lease was deleted")
	}
	if n := renewals.Hits(); n != before {
		t.Errorf("the leader stopped only after %d more renewal(s): the watch did not stop it", n-before)
	}
	err := a.e.MayWrite()
	if !errors.Is(err, leader.ErrNotWriter) || !strings.Contains(err.Error(), "deleted") {
		t.Errorf("MayWrite after the deletion = %v, want ErrNotWriter saying the Lease was deleted", err)
	}
	if cause := context.Cause(lctx); !errors.Is(cause, leader.ErrLost) {
		t.Errorf("lead's context ended with %v, want ErrLost", cause)
	}
	select {
	case err := <-a.done:
		if !errors.Is(err, leader.ErrLost) {
			t.Errorf("Run returned %v, want ErrLost", err)
		}
		a.done <- err
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after the Lease was lost")
	}
}

// A standby that sees the Lease held (unexpired), then deleted, creates it
// again: it did not see the old holder's term end, so it waits a lease
// duration before lead starts, says so (State.WaitUntil), and MayWrite
// refuses meanwhile. A standby may never write.
func TestRecreatedLeaseWaitsALeaseDuration(t *testing.T) {
	cp.Require(t)
	ns := cp.Namespace(t)
	const name = "recond-leader-r"
	const leaseDuration = 4 * time.Second
	leases := cp.Client.CoordinationV1().Leases(ns)
	holder, secs, now := "old", int32(60), metav1.NewMicroTime(time.Now())
	if _, err := leases.Create(context.Background(), &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: coordv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b := elect(t, leader.Config{Namespace: ns, Lease: name, Identity: "b",
		LeaseDuration: leaseDuration, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond}, cp.Client, nil)
	s := b.state(t, "b standby behind old", 20*time.Second, func(s leader.State) bool { return s.Holder == "old" })
	if s.Leading || !s.Expires.After(time.Now()) {
		t.Errorf("standby state %+v, want not leading and the holder's term not over", s)
	}
	if err := b.e.MayWrite(); !errors.Is(err, leader.ErrNotWriter) {
		t.Errorf("MayWrite on a standby = %v, want ErrNotWriter", err)
	}

	if err := leases.Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w := b.state(t, "b takes the recreated Lease and waits", 20*time.Second, func(s leader.State) bool { return !s.WaitUntil.IsZero() })
	if err := b.e.MayWrite(); !errors.Is(err, leader.ErrNotWriter) {
		t.Errorf("MayWrite while waiting after the takeover = %v, want ErrNotWriter", err)
	}
	l, err := leases.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != "b" {
		t.Fatalf("recreated Lease held by %v, want b", l.Spec.HolderIdentity)
	}
	b.lead(t, 20*time.Second)
	led := time.Now()
	// The Lease is microsecond-precise.
	if acquired := l.Spec.AcquireTime.Time; led.Before(acquired.Add(leaseDuration - time.Millisecond)) {
		t.Errorf("lead started %s after the takeover, before a lease duration (%s)", led.Sub(acquired), leaseDuration)
	}
	if w.WaitUntil.Before(l.Spec.AcquireTime.Add(leaseDuration - time.Millisecond)) {
		t.Errorf("WaitUntil %s is less than a lease duration after the takeover at %s", w.WaitUntil, l.Spec.AcquireTime)
	}
	if err := b.e.MayWrite(); err != nil {
		t.Errorf("MayWrite after the wait = %v", err)
	}
}

// A process whose identity may not use its Lease (no Role names it) says
// so: Config.Failed is told each refused request, Err returns it, the log
// has it once in recond's own words; granted the Role the deploy ships,
// it leads, says the Lease can be used again, and its watch works (list
// and watch by name).
func TestForbiddenLeaseIsReported(t *testing.T) {
	cp.Require(t)
	ns := cp.Namespace(t)
	const name = "recond-leader-f"
	cfg := rest.CopyConfig(cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "lease-user"}
	client := kubernetes.NewForConfigOrDie(cfg)
	var (
		mu       sync.Mutex
		failures []error
	)
	var log testenv.SyncBuffer
	el := elect(t, leader.Config{Namespace: ns, Lease: name, Identity: "f",
		LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond,
		Failed: func(err error) {
			mu.Lock()
			failures = append(failures, err)
			mu.Unlock()
		}}, client, slog.New(slog.NewJSONHandler(&log, nil)))
	waitFor(t, "a failure reported", 20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, err := range failures {
			var lerr *leader.LeaseError
			if errors.As(err, &lerr) && lerr.Op == "get" && apierrors.IsForbidden(err) {
				return true
			}
		}
		return false
	})
	if err := el.e.Err(); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "resourceNames") {
		t.Errorf("Err() = %v, want the get refused, with what the Role needs", err)
	}
	time.Sleep(2 * time.Second) // several retry periods: one log line, not one per attempt
	if n := strings.Count(log.String(), `"msg":"cannot use the lease"`); n != 1 {
		t.Errorf("%d lines say the Lease cannot be used, want 1:\n%s", n, log.String())
	}

	rbac := cp.Client.RbacV1()
	if _, err := rbac.Roles(ns).Create(context.Background(), &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "lease"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{name}, Verbs: []string{"get", "update", "list", "watch"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.RoleBindings(ns).Create(context.Background(), &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "lease"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "lease"},
		Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "lease-user"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	el.lead(t, 30*time.Second)
	if err := el.e.Err(); err != nil {
		t.Errorf("Err() = %v after the Role was granted", err)
	}
	if !strings.Contains(log.String(), `"msg":"the lease can be used again"`) {
		t.Errorf("the log does not say the Lease can be used again:\n%s", log.String())
	}
	// The watch (list and watch with the name as field selector) works
	// under that Role: no more failures once leading.
	mu.Lock()
	n := len(failures)
	mu.Unlock()
	time.Sleep(2 * time.Second)
	mu.Lock()
	defer mu.Unlock()
	if len(failures) != n {
		t.Errorf("requests on the Lease still failing under the Role: %v", failures[n:])
	}
}
