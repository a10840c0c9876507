package leader

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	rl "k8s.io/client-go/tools/leaderelection/resourcelock"
)

// The ways a process holds its instance's Lease (Config.Mode).
const (
	// ModeRenew is client-go's leader election: the holder renews the
	// Lease every retry period, a standby takes it over once it has not
	// been renewed for a lease duration.
	ModeRenew = "renew"
	// ModeClaim takes the Lease at start, whoever holds it, and renews it
	// only every third of Config.ClaimDuration: for a Deployment that
	// cannot run two pods of an instance (replicas: 1, strategy:
	// Recreate), where the process that starts is the one that replaced
	// the last. The watch on the Lease stops the writes of a process whose
	// Lease another one claimed. A claiming process that dies without
	// releasing the Lease holds it for ClaimDuration after its last
	// renewal at most: then a process that campaigns with renewals (a
	// standby, recond sync) takes it over.
	ModeClaim = "claim"
)

// DefaultClaimDuration is Config.ClaimDuration's default: a renewal every
// 3m20s (0.005 requests/s per instance), and a dead claimant's Lease taken
// over by a renewing process 10 minutes after its last renewal at most.
const DefaultClaimDuration = 10 * time.Minute

// claimDuration is the term a claim writes in the Lease.
func (e *Elector) claimDuration() time.Duration {
	if e.cfg.ClaimDuration > 0 {
		return e.cfg.ClaimDuration
	}
	return DefaultClaimDuration
}

// claimDeadline is how long a claimant may go without a successful
// renewal and still write: two of its renewals. Another process takes the
// Lease over only a whole claim after it last saw it change.
func (e *Elector) claimDeadline() time.Duration { return 2 * e.claimDuration() / 3 }

// runClaim is Run for ModeClaim: claim the Lease (retried every retry
// period while the API server refuses), run lead until ctx is done or
// another process claims the Lease, then release it if still held. In
// between, the only request on the Lease is a renewal every third of the
// claim (renewClaim): the watch shows a claim by another process.
func (e *Elector) runClaim(ctx context.Context, observe func(State), lead func(ctx context.Context)) error {
	cfg, log := e.cfg, e.log
	watchCtx, stopWatching := context.WithCancel(context.WithoutCancel(ctx))
	var watching sync.WaitGroup
	watching.Go(func() { e.watch(watchCtx) })
	defer func() {
		stopWatching()
		watching.Wait()
	}()
	observe(State{})
	log.Info("claiming the lease (--leader-elect-mode=claim: taken at once, renewed every third of its term)", "lease", cfg.Lease, "identity", cfg.Identity,
		"claim_duration", e.claimDuration().String())
	lk := &lock{e: e}
	for {
		if err := ctx.Err(); err != nil {
			return nil
		}
		err := e.claim(ctx, lk)
		if err == nil {
			break
		}
		if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) && !apierrors.IsNotFound(err) {
			t := time.NewTimer(cfg.RetryPeriod)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
		}
	}

	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	e.mu.Lock()
	e.held, e.cancelLead, e.notBefore = true, cancel, time.Time{}
	e.leading = e.lost == nil
	e.mu.Unlock()
	log.Info("leading: claimed the lease", "lease", cfg.Lease, "identity", cfg.Identity)
	observe(State{Leading: true, Holder: cfg.Identity})
	renewCtx, stopRenewing := context.WithCancel(runCtx)
	var renewing sync.WaitGroup
	renewing.Go(func() { e.renewClaim(renewCtx, lk) })
	lead(runCtx)
	stopRenewing()
	renewing.Wait()
	e.mu.Lock()
	lost := e.lost
	e.held, e.leading, e.cancelLead = false, false, nil
	e.mu.Unlock()
	if lost != nil {
		observe(State{Leading: false})
		return lost
	}
	e.release(lk)
	return nil
}

// claim writes this process as the Lease's holder over whatever it holds,
// preconditioned on the resourceVersion just read: a conflict (another
// process wrote it in between) is returned, for the caller to read it and
// claim again.
func (e *Elector) claim(ctx context.Context, lk *lock) error {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.RenewDeadline)
	defer cancel()
	now := metav1.NewTime(time.Now())
	rec := rl.LeaderElectionRecord{
		HolderIdentity:       e.cfg.Identity,
		LeaseDurationSeconds: int(e.claimDuration() / time.Second),
		AcquireTime:          now, RenewTime: now,
	}
	old, _, err := lk.Get(ctx)
	switch {
	case apierrors.IsNotFound(err):
		return lk.Create(ctx, rec)
	case err != nil:
		return err
	}
	rec.LeaderTransitions = old.LeaderTransitions
	if old.HolderIdentity != e.cfg.Identity {
		rec.LeaderTransitions++
		if old.HolderIdentity != "" {
			e.log.Info("claiming the lease from its last holder", "lease", e.cfg.Lease, "holder", old.HolderIdentity)
		}
	}
	if err := lk.Update(ctx, rec); err != nil {
		return err
	}
	return nil
}

// renewClaim renews the claimed Lease every third of its term until ctx
// is done, so that a standby or recond sync can tell a live claimant from
// a dead one: the renewal is the claimant's sign of life. A renewal the
// API server refuses is retried every retry period; one that finds the
// Lease changed reads it, which ends the leadership when another process
// holds it. Renewals that fail for claimDeadline end it too: the Lease
// may be taken over at the claim's end.
func (e *Elector) renewClaim(ctx context.Context, lk *lock) {
	every := e.claimDuration() / 3
	next := every
	for {
		t := time.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		err := e.renewOnce(ctx, lk)
		if ctx.Err() != nil {
			return
		}
		e.mu.Lock()
		since, lost := time.Since(e.renewed), e.lost != nil
		if err != nil && !lost && since > e.claimDeadline() {
			e.end(fmt.Sprintf("the claim's renewals failed for %s, two thirds of its term (%s): another process may take it over at its end (%v)",
				since.Round(time.Second), e.claimDuration(), err))
			lost = true
		}
		e.mu.Unlock()
		if lost {
			return
		}
		next = every
		if err != nil {
			next = e.cfg.RetryPeriod
		}
	}
}

// renewOnce writes a new renewal time into the claimed Lease,
// preconditioned on its resourceVersion as last read or written; a
// conflict is followed by a read, whose observation ends the leadership if
// another process holds the Lease now.
func (e *Elector) renewOnce(ctx context.Context, lk *lock) error {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.RenewDeadline)
	defer cancel()
	if lk.lease == nil {
		return errors.New("the lease was never claimed")
	}
	rec := rl.LeaseSpecToLeaderElectionRecord(&lk.lease.Spec)
	rec.RenewTime = metav1.NewTime(time.Now())
	err := lk.Update(ctx, *rec)
	if apierrors.IsConflict(err) {
		_, _, _ = lk.Get(ctx)
	}
	return err
}

// claimAdvice is added to why a claimed Lease was lost.
const claimAdvice = "; with --leader-elect-mode=claim the instance must run as one pod (replicas: 1, strategy: Recreate): a second process takes the Lease from the first"
