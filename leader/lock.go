package leader

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	rl "k8s.io/client-go/tools/leaderelection/resourcelock"
)

// lock is client-go's LeaseLock with eyes: every read and write the
// election makes is an observation for the Elector (who holds the Lease,
// its UID, whether it exists) and every refused request is reported. It
// is used by one elector goroutine at a time.
type lock struct {
	e *Elector
	// lease is the Lease as last read or written (Update needs its
	// resourceVersion).
	lease *coordv1.Lease
}

var _ rl.Interface = (*lock)(nil)

// Get reads the Lease.
func (l *lock) Get(ctx context.Context) (*rl.LeaderElectionRecord, []byte, error) {
	lease, err := l.e.leases().Get(ctx, l.e.cfg.Lease, metav1.GetOptions{})
	if !l.settle(ctx, opGet, err, apierrors.IsNotFound) {
		if apierrors.IsNotFound(err) {
			l.e.observe(nil)
		}
		return nil, nil, err
	}
	l.lease = lease
	l.e.observe(lease)
	rec := rl.LeaseSpecToLeaderElectionRecord(&lease.Spec)
	raw, err := json.Marshal(*rec)
	if err != nil {
		return nil, nil, err
	}
	return rec, raw, nil
}

// Create creates the Lease, held by this process.
func (l *lock) Create(ctx context.Context, ler rl.LeaderElectionRecord) error {
	start := time.Now()
	lease, err := l.e.leases().Create(ctx, &coordv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: l.e.cfg.Lease, Namespace: l.e.cfg.Namespace},
		Spec:       rl.LeaderElectionRecordToLeaseSpec(&ler),
	}, metav1.CreateOptions{})
	if !l.settle(ctx, opCreate, err, apierrors.IsAlreadyExists) {
		if apierrors.IsAlreadyExists(err) {
			// Another process created it first: a race lost, not a failure.
			l.e.sawExist()
		}
		return err
	}
	l.lease = lease
	l.e.wrote(lease, start, true)
	return nil
}

// Update writes the record over the Lease last read or written.
func (l *lock) Update(ctx context.Context, ler rl.LeaderElectionRecord) error {
	if l.lease == nil {
		return errors.New("lease not initialized, call get or create first")
	}
	lease := l.lease.DeepCopy()
	lease.Spec = rl.LeaderElectionRecordToLeaseSpec(&ler)
	start := time.Now()
	out, err := l.e.leases().Update(ctx, lease, metav1.UpdateOptions{})
	// A conflict: changed since it was read; the election reads it again.
	if !l.settle(ctx, opUpdate, err, func(err error) bool { return apierrors.IsNotFound(err) || apierrors.IsConflict(err) }) {
		if apierrors.IsNotFound(err) {
			l.e.observe(nil)
		}
		return err
	}
	l.lease = out
	l.e.wrote(out, start, false)
	return nil
}

// settle counts the request op on the Lease as the error it returned says,
// and reports whether it returned the Lease (err is nil). An error answered
// says something about the Lease (not found, already there, changed since
// it was read) and counts as a successful request; a request cut short
// because the process is stopping (or its campaign ended) is not a failure
// of the Lease; any other error is.
func (l *lock) settle(ctx context.Context, op string, err error, answered func(error) bool) bool {
	switch {
	case err == nil:
		l.e.succeeded(op)
		return true
	case answered(err):
		l.e.succeeded(op)
	case errors.Is(ctx.Err(), context.Canceled):
	default:
		l.e.failed(op, err)
	}
	return false
}

// RecordEvent sends no Event: recond's log says who leads.
func (l *lock) RecordEvent(string) {}

// Identity is this process's identity in the Lease.
func (l *lock) Identity() string { return l.e.cfg.Identity }

// Describe is "namespace/name".
func (l *lock) Describe() string { return l.e.cfg.Namespace + "/" + l.e.cfg.Lease }

// The requests made on the Lease, as reported in a LeaseError.
const (
	opGet    = "get"
	opCreate = "create"
	opUpdate = "update"
	opWatch  = "watch"
)

// LeaseError is a request on the instance's Lease that failed for another
// reason than the Lease's own state (a race lost, a Lease not found): the
// Role does not allow it, the API server is unreachable, ... The process
// cannot campaign, or, for a watch, cannot see a takeover at once.
type LeaseError struct {
	// Op is the request: get, create, update or watch (a LIST or a WATCH
	// with the Lease's name as field selector).
	Op string
	// Lease is "namespace/name".
	Lease string
	Err   error
}

func (e *LeaseError) Error() string {
	msg := fmt.Sprintf("%s lease %s: %v", e.Op, e.Lease, e.Err)
	if apierrors.IsForbidden(e.Err) || apierrors.IsUnauthorized(e.Err) {
		msg += "; recond's Role must allow get, update, list and watch on this Lease by name (resourceNames) and create on leases, and --name must be the instance the Role names (docs/runbooks.md, \"Lease\")"
	}
	return msg
}

// Unwrap returns the API error.
func (e *LeaseError) Unwrap() error { return e.Err }
