package leader

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	rl "k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Config says which Lease to campaign for and how.
type Config struct {
	Namespace string
	// Lease is the Lease's name (reconcile.LeaseName of the instance).
	Lease string
	// Identity names this process in the Lease; "" means a new one
	// (Identity()).
	Identity string
	// LeaseDuration is how long a standby waits after the last renewal
	// before it takes over; RenewDeadline how long the leader keeps trying
	// to renew before it stops leading; RetryPeriod the time between
	// attempts.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Mode is how the Lease is held: ModeRenew ("" too) or ModeClaim.
	// With ModeClaim, RetryPeriod paces the retries of a claim or renewal
	// the API server refused and RenewDeadline bounds each request.
	Mode string
	// ClaimDuration is the term a claim (ModeClaim) writes in the Lease;
	// the holder renews it every third of it. DefaultClaimDuration when 0.
	ClaimDuration time.Duration
	// Failed, when set, is told every failed request on the Lease, as a
	// *LeaseError (metrics count them).
	Failed func(error)
}

// State is what a process is for its instance.
type State struct {
	Leading bool
	// Holder is the identity holding the Lease, when known ("" before the
	// first observation).
	Holder string
	// Expires is when the holder's term ends by the Lease's own record (its
	// last renewal plus its duration, by the holder's clock); zero when not
	// known. A holder whose term has not ended may still write.
	Expires time.Time
	// Renewed is the holder's last renewal by the Lease's record; zero
	// when not known. See Overdue.
	Renewed time.Time
	// WaitUntil is set while this process holds the Lease but waits before
	// its first write: it took over a Lease it did not see expire.
	WaitUntil time.Time
}

// Overdue reports whether, at now, the holder has gone without renewing
// the Lease for more than half its term: a live holder renews well within
// that (every retry period with ModeRenew, every third of its claim with
// ModeClaim), so it has most likely stopped without releasing the Lease,
// which it holds until Expires all the same. False when not known.
func (s State) Overdue(now time.Time) bool {
	if s.Renewed.IsZero() || !s.Expires.After(s.Renewed) {
		return false
	}
	return now.Sub(s.Renewed) > s.Expires.Sub(s.Renewed)/2
}

// ErrLost is returned by Run when the Lease was lost while leading: the
// renewals failed for RenewDeadline, or the Lease was seen deleted or held
// by another process. The process has stopped writing.
var ErrLost = errors.New("lost the lease")

// Identity returns a process identity: $POD_NAME (or the host name) and a
// random suffix, so that two processes on one host differ.
func Identity() string {
	name := os.Getenv("POD_NAME")
	if name == "" {
		name, _ = os.Hostname()
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return name + "_" + hex.EncodeToString(b)
}

// Elector campaigns for one Lease (Run, once) and knows at any moment
// whether this process may write (MayWrite).
type Elector struct {
	cfg    Config
	client coordinationv1.CoordinationV1Interface
	log    *slog.Logger

	mu sync.Mutex
	// held is set from the acquisition of the Lease until lead has
	// returned; leading while lead runs (after any wait).
	held, leading bool
	// term is the UID of the Lease this process acquired: one deleted and
	// created again is another term, even if this process created it.
	term types.UID
	// seen are the incarnations (UIDs) of the Lease this process has seen
	// exist.
	seen map[types.UID]struct{}
	// renewed is when the last successful write of the Lease by this
	// process started.
	renewed time.Time
	// notBefore is the end of the wait after taking over a Lease that this
	// process did not see expire.
	notBefore time.Time
	// lost is why this process stopped leading (nil while it leads).
	lost error
	// cancelLead cancels lead's context.
	cancelLead context.CancelCauseFunc
	// last is the Lease as last read or written.
	last observation
	// failures is the last failure of each request (nil once it succeeds);
	// logged is when each was last logged.
	failures map[string]error
	logged   map[string]time.Time
}

// New returns an Elector for cfg. An empty Identity gets Identity().
func New(cfg Config, client coordinationv1.CoordinationV1Interface, log *slog.Logger) *Elector {
	if cfg.Identity == "" {
		cfg.Identity = Identity()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Elector{cfg: cfg, client: client, log: log, failures: map[string]error{}, logged: map[string]time.Time{},
		seen: map[types.UID]struct{}{}}
}

// Identity is the identity this Elector writes in the Lease.
func (e *Elector) Identity() string { return e.cfg.Identity }

func (e *Elector) leases() coordinationv1.LeaseInterface { return e.client.Leases(e.cfg.Namespace) }

// Run campaigns for the Lease with a new Elector until ctx is done (see
// Elector.Run).
func Run(ctx context.Context, cfg Config, client coordinationv1.CoordinationV1Interface, log *slog.Logger,
	observe func(State), lead func(ctx context.Context)) error {
	return New(cfg, client, log).Run(ctx, observe, lead)
}

// Run campaigns for the Lease until ctx is done. While it holds the Lease it
// runs lead with a context that is cancelled when ctx is done or the Lease
// is lost (its cause says why); the Lease is released only after lead has
// returned. observe is told every change of State. Run returns nil when ctx
// was cancelled or lead returned, an error wrapping ErrLost when the Lease
// was lost while leading, or an error when the election cannot start. Run
// is called once per Elector.
func (e *Elector) Run(ctx context.Context, observe func(State), lead func(ctx context.Context)) error {
	cfg, log := e.cfg, e.log
	if observe == nil {
		observe = func(State) {}
	}
	if cfg.Mode == ModeClaim {
		return e.runClaim(ctx, observe, lead)
	}
	lk := &lock{e: e}

	// The elector has a context of its own, cancelled only once lead has
	// returned, so that the Lease is released after the last write.
	// client-go's own log lines go to recond's log at debug level: what
	// matters is logged here, in recond's words.
	electCtx, cancelElect := context.WithCancel(logr.NewContext(context.WithoutCancel(ctx),
		logr.FromSlogHandler(debugOnly{log.With("component", "client-go leaderelection").Handler()})))
	defer cancelElect()
	watchCtx, stopWatching := context.WithCancel(electCtx)
	var watching sync.WaitGroup
	watching.Go(func() { e.watch(watchCtx) })
	defer func() {
		stopWatching()
		watching.Wait()
	}()
	var (
		mu       sync.Mutex
		started  bool
		finished = make(chan struct{})
		done     bool // lead returned by itself
	)
	stopAfterLead := func() {
		mu.Lock()
		s := started
		mu.Unlock()
		if s {
			<-finished
		}
		cancelElect()
	}
	stopWatch := context.AfterFunc(ctx, stopAfterLead)
	defer stopWatch()

	el, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          lk,
		Name:          cfg.Lease,
		LeaseDuration: cfg.LeaseDuration,
		RenewDeadline: cfg.RenewDeadline,
		RetryPeriod:   cfg.RetryPeriod,
		// Released by Run itself once lead has returned: client-go's own
		// release comes before the leading context is cancelled when the
		// renewals fail, while writes may still be in flight.
		ReleaseOnCancel: false,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				mu.Lock()
				started = true
				mu.Unlock()
				defer close(finished)
				if ctx.Err() != nil || electCtx.Err() != nil {
					return // stopped while acquiring: lead nothing
				}
				runCtx, cancel := context.WithCancelCause(lctx)
				defer cancel(nil)
				e.mu.Lock()
				e.held, e.cancelLead = true, cancel
				wait := time.Until(e.notBefore)
				until := e.notBefore
				e.mu.Unlock()
				defer func() {
					e.mu.Lock()
					e.held, e.leading, e.cancelLead = false, false, nil
					e.mu.Unlock()
				}()
				// Renewals that failed for the renew deadline end the
				// leadership like a takeover seen by the watch.
				stopLoss := context.AfterFunc(lctx, func() {
					e.mu.Lock()
					defer e.mu.Unlock()
					e.lose(fmt.Sprintf("renewals failed for the renew deadline (%s)", cfg.RenewDeadline))
				})
				defer stopLoss()
				stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
				defer stop()
				if wait > 0 {
					log.Warn("holding the lease, which was deleted and created again: no write until the old holder has given up (a lease duration)",
						"lease", cfg.Lease, "identity", cfg.Identity, "wait", wait.Round(time.Millisecond).String())
					observe(State{Holder: cfg.Identity, WaitUntil: until})
					t := time.NewTimer(wait)
					select {
					case <-t.C:
					case <-runCtx.Done():
					}
					t.Stop()
				}
				if runCtx.Err() == nil {
					e.mu.Lock()
					e.leading = e.lost == nil
					e.mu.Unlock()
					log.Info("leading: holding the lease", "lease", cfg.Lease, "identity", cfg.Identity)
					observe(State{Leading: true, Holder: cfg.Identity})
					lead(runCtx)
				}
				// From here on a cancelled lctx is the election's stop
				// (cancelElect below), not a lost Lease.
				stopLoss()
				e.mu.Lock()
				lost := e.lost != nil
				e.mu.Unlock()
				mu.Lock()
				done = ctx.Err() == nil && lctx.Err() == nil && !lost
				mu.Unlock()
				if done || lost {
					cancelElect()
				}
			},
			OnStoppedLeading: func() {},
			OnNewLeader: func(identity string) {
				if identity == cfg.Identity {
					return
				}
				e.mu.Lock()
				s := State{Holder: identity}
				if e.last.holder == identity {
					s.Expires, s.Renewed = e.last.expires, e.last.renewed
				}
				e.mu.Unlock()
				log.Info("standby: another process holds the lease; waiting to take over", "lease", cfg.Lease, "holder", identity)
				observe(s)
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	observe(State{})
	log.Info("campaigning for the lease", "lease", cfg.Lease, "identity", cfg.Identity)
	el.Run(electCtx)

	mu.Lock()
	s := started
	mu.Unlock()
	if !s {
		return nil // stopped while standby
	}
	<-finished
	mu.Lock()
	lost := ctx.Err() == nil && !done
	mu.Unlock()
	if lost {
		// Not released: the Lease is someone else's by now, or will be
		// once it expires.
		observe(State{Leading: false})
		e.mu.Lock()
		err := e.lost
		e.mu.Unlock()
		if err == nil {
			err = fmt.Errorf("%w %s: renewals failed for %s", ErrLost, e.describe(), cfg.RenewDeadline)
		}
		return err
	}
	e.release(lk)
	return nil
}

// release gives the Lease up after a clean stop, so that a standby takes
// over at once instead of after the lease duration: only if this process
// still holds it.
func (e *Elector) release(lk *lock) {
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.RenewDeadline)
	defer cancel()
	rec, _, err := lk.Get(ctx)
	if err != nil || rec == nil || rec.HolderIdentity != e.cfg.Identity {
		return
	}
	now := metav1.NewTime(time.Now())
	if err := lk.Update(ctx, rl.LeaderElectionRecord{
		LeaderTransitions: rec.LeaderTransitions, LeaseDurationSeconds: 1, RenewTime: now, AcquireTime: now,
	}); err != nil {
		e.log.Warn("could not release the lease; a standby takes over when it expires", "lease", e.cfg.Lease, "error", err)
	}
}

// failAgainAfter is how often a request on the Lease that keeps failing
// the same way is logged again.
const failAgainAfter = time.Minute

// failed reports a request on the Lease that failed: to Config.Failed each
// time, to the log when it is new or changed, and again every
// failAgainAfter while it lasts.
func (e *Elector) failed(op string, err error) {
	lerr := &LeaseError{Op: op, Lease: e.describe(), Err: err}
	e.mu.Lock()
	prev := e.failures[op]
	e.failures[op] = lerr
	now := time.Now()
	logIt := prev == nil || prev.Error() != lerr.Error() || now.Sub(e.logged[op]) >= failAgainAfter
	if logIt {
		e.logged[op] = now
	}
	e.mu.Unlock()
	if e.cfg.Failed != nil {
		e.cfg.Failed(lerr)
	}
	if !logIt {
		return
	}
	if op == opWatch {
		e.log.Warn("cannot watch the lease: a takeover is seen at the next renewal instead of at once", "lease", e.cfg.Lease, "error", lerr)
		return
	}
	e.log.Error("cannot use the lease", "lease", e.cfg.Lease, "request", op, "error", lerr)
}

// succeeded records a request on the Lease that was not refused.
func (e *Elector) succeeded(op string) {
	e.mu.Lock()
	prev := e.failures[op]
	delete(e.failures, op)
	e.mu.Unlock()
	if prev != nil {
		e.log.Info("the lease can be used again", "lease", e.cfg.Lease, "request", op)
	}
}

// debugOnly hands client-go's log records to recond's handler at debug
// level. A record whose error is a cancelled context is dropped: it is the
// election stopping with the process (a request cut short), which recond
// logs in its own words, not a failure of the Lease.
type debugOnly struct{ h slog.Handler }

func (d debugOnly) Enabled(ctx context.Context, _ slog.Level) bool {
	return d.h.Enabled(ctx, slog.LevelDebug)
}

func (d debugOnly) Handle(ctx context.Context, r slog.Record) error {
	cancelled := false
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok && errors.Is(err, context.Canceled) {
			cancelled = true
			return false
		}
		return true
	})
	if cancelled {
		return nil
	}
	r.Level = slog.LevelDebug
	return d.h.Handle(ctx, r)
}

func (d debugOnly) WithAttrs(as []slog.Attr) slog.Handler { return debugOnly{d.h.WithAttrs(as)} }
func (d debugOnly) WithGroup(name string) slog.Handler    { return debugOnly{d.h.WithGroup(name)} }
