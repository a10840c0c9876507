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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
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
}

// State is what a process is for its instance.
type State struct {
	Leading bool
	// Holder is the identity holding the Lease, when known ("" before the
	// first observation).
	Holder string
}

// ErrLost is returned by Run when the Lease was lost while leading (the
// renewals failed for RenewDeadline): the process must stop writing.
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

// Run campaigns for the Lease until ctx is done. While it holds the Lease it
// runs lead with a context that is cancelled when ctx is done or the Lease
// is lost; the Lease is released only after lead has returned. observe is
// told every change of State. Run returns nil when ctx was cancelled or lead
// returned, ErrLost when the Lease was lost while leading, or an error when
// the Lease cannot be used at all.
func Run(ctx context.Context, cfg Config, client coordinationv1.CoordinationV1Interface, log *slog.Logger,
	observe func(State), lead func(ctx context.Context)) error {
	if cfg.Identity == "" {
		cfg.Identity = Identity()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if observe == nil {
		observe = func(State) {}
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.Lease},
		Client:     client,
		LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
	}

	// The elector has a context of its own, cancelled only once lead has
	// returned, so that the Lease is released after the last write.
	electCtx, cancelElect := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelElect()
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
		Lock:          lock,
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
				log.Info("leading: holding the lease", "lease", cfg.Lease, "identity", cfg.Identity)
				observe(State{Leading: true, Holder: cfg.Identity})
				runCtx, cancel := context.WithCancel(lctx)
				defer cancel()
				stop := context.AfterFunc(ctx, cancel)
				defer stop()
				lead(runCtx)
				mu.Lock()
				done = ctx.Err() == nil && lctx.Err() == nil
				mu.Unlock()
				if done {
					cancelElect()
				}
			},
			OnStoppedLeading: func() {},
			OnNewLeader: func(identity string) {
				if identity == cfg.Identity {
					return
				}
				log.Info("standby: another process holds the lease; waiting to take over", "lease", cfg.Lease, "holder", identity)
				observe(State{Leading: false, Holder: identity})
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
		return fmt.Errorf("%w %s/%s: renewals failed for %s", ErrLost, cfg.Namespace, cfg.Lease, cfg.RenewDeadline)
	}
	release(lock, cfg, log)
	return nil
}

// release gives the Lease up after a clean stop, so that a standby takes
// over at once instead of after the lease duration: only if this process
// still holds it.
func release(lock *resourcelock.LeaseLock, cfg Config, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.RenewDeadline)
	defer cancel()
	rec, _, err := lock.Get(ctx)
	if err != nil || rec == nil || rec.HolderIdentity != cfg.Identity {
		return
	}
	now := metav1.NewTime(time.Now())
	if err := lock.Update(ctx, resourcelock.LeaderElectionRecord{
		LeaderTransitions: rec.LeaderTransitions, LeaseDurationSeconds: 1, RenewTime: now, AcquireTime: now,
	}); err != nil {
		log.Warn("could not release the lease; a standby takes over when it expires", "lease", cfg.Lease, "error", err)
	}
}
