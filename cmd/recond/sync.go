package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"recond.dev/recond/leader"
	"recond.dev/recond/reconcile"
)

// busyError is the Lease held by another process of the instance, live or
// overdue (leader.State.Overdue: it has most likely stopped without
// releasing the Lease, which it holds until expires all the same).
type busyError struct {
	holder           string
	renewed, expires time.Time
	overdue          bool
}

func (e *busyError) Error() string { return "the lease is held by " + e.holder }

// errLeaseWait is the Lease not taken within the time sync may wait for it.
var errLeaseWait = errors.New("the lease was not taken in time")

// syncCommand is `recond sync`: one tick, exit 0 when it succeeded, 1 when
// it failed or did not start (a.sync).
func syncCommand(ctx context.Context, args []string, stderr io.Writer) int {
	return withApp("sync", args, stderr, func(a *app) int { return a.sync(ctx) })
}

// buildSync adds what recond sync uses: the election, with renewals
// whatever the mode (one tick: it so waits for a claimed Lease to be
// released), and Events.
func (a *app) buildSync(p *parts) error {
	lc := a.leaderConfig()
	lc.Mode = leader.ModeRenew
	if err := p.elect(a, lc); err != nil {
		return err
	}
	if err := p.addEvents(a); err != nil {
		return err
	}
	p.reconciler(a)
	return nil
}

// sync is `recond sync`: one tick, under the instance's Lease. The Lease
// held by another live process (the instance's running recond) is said at
// once and ends sync with exit 1, unless --wait-for-lease asks to wait for
// it; a Lease that cannot be used (RBAC) ends it at once too. The tick
// itself has --tick-timeout, from the moment it starts.
func (a *app) sync(ctx context.Context) int {
	defer a.flush()
	tick := func(ctx context.Context) *reconcile.Result {
		tctx, cancel := context.WithTimeout(ctx, a.opts.tickTimeout)
		defer cancel()
		return a.rec.Tick(tctx)
	}
	if a.elector == nil {
		return exitCode(tick(ctx))
	}
	lease := reconcile.LeaseName(a.opts.name)
	cctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	var (
		mu      sync.Mutex
		started bool
		res     *reconcile.Result
	)
	// refuse ends the campaign with why, unless the tick has started.
	refuse := func(why error) {
		mu.Lock()
		defer mu.Unlock()
		if !started {
			stop(why)
		}
	}
	a.leaseFailed = func(err error) {
		var lerr *leader.LeaseError
		if errors.As(err, &lerr) && lerr.Op == "watch" {
			return // the election works without the watch
		}
		refuse(err)
	}
	// How long the Lease may take: --wait-for-lease, or without it enough
	// to take over a Lease whose holder is gone (expired, released, or
	// deleted and created again).
	wait := a.opts.waitForLease
	bound := wait
	if bound == 0 {
		bound = 2*a.opts.lease.LeaseDuration + a.opts.lease.RetryPeriod
	}
	timer := time.AfterFunc(bound, func() { refuse(fmt.Errorf("%w: not within %s", errLeaseWait, bound)) })
	defer timer.Stop()
	observe := func(s leader.State) {
		if wait == 0 && !s.Leading && s.Holder != "" && s.Holder != a.elector.Identity() && time.Now().Before(s.Expires) {
			refuse(&busyError{holder: s.Holder, renewed: s.Renewed, expires: s.Expires, overdue: s.Overdue(time.Now())})
		}
	}
	err := a.elector.Run(cctx, observe, func(lctx context.Context) {
		mu.Lock()
		if cctx.Err() != nil {
			mu.Unlock()
			return
		}
		started = true
		mu.Unlock()
		res = tick(lctx)
	})
	var (
		busy *busyError
		lerr *leader.LeaseError
	)
	cause := context.Cause(cctx)
	switch {
	case res != nil:
		if err != nil {
			a.log.Error("leader election", "error", err)
		}
		return exitCode(res)
	case err != nil:
		a.log.Error("leader election", "error", err)
	case errors.As(cause, &busy) && busy.overdue:
		a.log.Error("another process of this instance holds the lease but has not renewed it for over half its term: it has most likely stopped without releasing it, and holds it until the term ends; then any process takes it over: `recond sync --wait-for-lease DURATION` waits for that (or delete the Lease if that process is gone); nothing done",
			"lease", lease, "holder", busy.holder, "renewed", busy.renewed.Format(time.RFC3339), "expires", busy.expires.Format(time.RFC3339),
			"expires_in", time.Until(busy.expires).Round(time.Second).String())
	case errors.As(cause, &busy):
		a.log.Error("another process of this instance holds the lease and ticks on its own: `recond trigger --url <its --listen address>` asks it for a tick now (POST /api/v1/sync, with its --sync-token-file); or run `recond sync --wait-for-lease DURATION` to wait for the lease; nothing done",
			"lease", lease, "holder", busy.holder, "expires", busy.expires.Format(time.RFC3339))
	case errors.As(cause, &lerr):
		a.log.Error("cannot campaign for the lease; nothing done", "lease", lease, "reason", string(reconcile.Classify(lerr)), "error", lerr)
	case errors.Is(cause, errLeaseWait) && wait > 0:
		a.log.Error("another process held the lease for the whole --wait-for-lease; nothing done", "lease", lease, "wait_for_lease", wait.String())
	case errors.Is(cause, errLeaseWait):
		a.log.Error("the lease was not taken in time; nothing done", "lease", lease, "waited", bound.String())
	default:
		a.log.Error("stopped before the lease was taken; nothing done", "lease", lease, "reason", string(reconcile.Classify(cause)))
	}
	return 1
}
