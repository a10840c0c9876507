package leader

import (
	"context"
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
	// ModeClaim takes the Lease once, at start, whoever holds it, and
	// never renews it: for a Deployment that cannot run two pods of an
	// instance (replicas: 1, strategy: Recreate), where the process that
	// starts is the one that replaced the last. The watch on the Lease
	// stops the writes of a process whose Lease another one claimed.
	ModeClaim = "claim"
)

// claimDuration is the term written in a claimed Lease: a claim holds
// until it is released or claimed by the next process, so that a process
// that campaigns with renewals (recond sync) waits for it.
const claimDuration = 365 * 24 * time.Hour

// runClaim is Run for ModeClaim: claim the Lease (retried every retry
// period while the API server refuses), run lead until ctx is done or
// another process claims the Lease, then release it if still held. It
// makes no request on the Lease in between: the watch shows a claim by
// another process.
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
	log.Info("claiming the lease (--leader-elect-mode=claim: taken at once, never renewed)", "lease", cfg.Lease, "identity", cfg.Identity)
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
	lead(runCtx)
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
		LeaseDurationSeconds: int(claimDuration / time.Second),
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

// claimAdvice is added to why a claimed Lease was lost.
const claimAdvice = "; with --leader-elect-mode=claim the instance must run as one pod (replicas: 1, strategy: Recreate): a second process takes the Lease from the first"
