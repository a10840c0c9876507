package leader_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/leader"
)

// A leader whose Lease is deleted stops writing at once: its watch sees
// the deletion, MayWrite refuses and lead's context ends before the
// election has tried to renew again (renewals are 10 s apart here, so only
// the watch can have seen it), and Run returns ErrLost. A Lease this
// process never saw before is taken without waiting.
func TestDeletedLeaseStopsTheWriterAtOnce(t *testing.T) {
	const name = "recond-leader-w"
	p := proxiedLease(t, name)
	ns := p.ns
	a := elect(t, leader.Config{Namespace: ns, Lease: name, Identity: "a",
		LeaseDuration: 40 * time.Second, RenewDeadline: 30 * time.Second, RetryPeriod: 10 * time.Second}, p.client, nil)
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
	before := p.writes.Hits()
	if err := leases.Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ended(t, "the leader, its Lease deleted", lctx, 20*time.Second)
	if n := p.writes.Hits(); n != before {
		t.Errorf("the leader stopped only after %d more renewal(s): the watch did not stop it", n-before)
	}
	err := a.e.MayWrite()
	if !errors.Is(err, leader.ErrNotWriter) || !strings.Contains(err.Error(), "deleted") {
		t.Errorf("MayWrite after the deletion = %v, want ErrNotWriter saying the Lease was deleted", err)
	}
	if cause := context.Cause(lctx); !errors.Is(cause, leader.ErrLost) {
		t.Errorf("lead's context ended with %v, want ErrLost", cause)
	}
	if err := returned(t, "the leader, its Lease lost", a.done, 20*time.Second); !errors.Is(err, leader.ErrLost) {
		t.Errorf("Run returned %v, want ErrLost", err)
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
	holdLease(t, ns, name, "old", 60)
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
	l := getLease(t, ns, name)
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
