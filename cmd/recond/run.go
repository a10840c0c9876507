package main

import (
	"context"
	"io"
	"os"
	"runtime/debug"
	"time"

	"recond.dev/recond/leader"
	"recond.dev/recond/reconcile"
	"recond.dev/recond/status"
)

// runCommand is `recond run`: it ticks now and every --interval until ctx
// is cancelled, serving /healthz, /readyz, /metrics, the status page and
// the endpoints that ask for a tick.
func runCommand(ctx context.Context, args []string, stderr io.Writer) int {
	return withApp("run", args, stderr, func(a *app) int { return a.run(ctx) })
}

// buildRun adds what recond run uses: the election as the flags set it,
// the status page, Events, the watch caches and, once the reconciler is
// made, the endpoints that ask it for ticks.
func (a *app) buildRun(p *parts) error {
	o := a.opts
	if err := p.elect(a, a.leaderConfig()); err != nil {
		return err
	}
	// The ring behind the status page and GET /api/v1/ticks/{id}; after
	// tracing, so that it sees each tick's trace id.
	info := o.page
	info.Namespace, info.Instance, info.Repo, info.Ref, info.Path = o.namespace, o.name, p.src.DisplayURL(), o.ref, o.path
	info.Observe, info.Interval = o.observe, o.interval
	a.page = status.New(info, status.Options{Progress: p.later.progress})
	p.observers = append(p.observers, a.page)
	if err := p.addEvents(a); err != nil {
		return err
	}
	if err := p.addWatch(a); err != nil {
		return err
	}
	p.reconciler(a)
	return a.endpoints()
}

// run ticks until ctx is cancelled, serving /healthz and /readyz.
func (a *app) run(ctx context.Context) int {
	stop, err := a.serve()
	if err != nil {
		a.log.Error("listen", "error", err)
		return 2
	}
	defer stop()
	// A long-lived process with a small heap: less headroom (gcPercent).
	gc, gcFrom := setGCPercent(os.Getenv, debug.SetGCPercent)
	a.log.Info("garbage collector", "gc_percent", gc, "gc_percent_from", gcFrom)
	mem := newMemoryReleaser()
	loop := func(ctx context.Context) {
		a.loopSince.Store(time.Now().UnixNano())
		defer a.loopSince.Store(0)
		a.rec.Run(ctx, a.opts.interval, a.opts.tickTimeout, func(r *reconcile.Result) {
			if r.Failure() == nil {
				a.ready.Store(true)
			}
			// What the tick freed goes back before the wait for the next.
			mem.afterTick()
		})
	}
	code := 0
	switch {
	case !a.jitter(ctx):
		// Stopped during the start-up jitter: nothing ran.
	case a.elector != nil:
		if err := a.elector.Run(ctx, a.observeRole, loop); err != nil {
			a.log.Error("leader election: stopping so that a restart rejoins as standby", "error", err)
			code = 1
		}
	default:
		a.observeRole(leader.State{Leading: true})
		loop(ctx)
	}
	if a.cache != nil {
		a.cache.Close()
	}
	a.flush()
	a.log.Info("recond stopped")
	return code
}

// observeRole records whether this process leads, for /readyz and the
// recond_leader gauge.
func (a *app) observeRole(s leader.State) {
	a.role.Store(&s)
	a.metrics.SetLeader(s.Leading)
}

// jitter waits the start-up jitter (--start-jitter), after the endpoints
// (the probes answer meanwhile) and before the Lease: a replacement
// started now waits it, a standby already running (its own jitter long
// past) takes over at once. False: ctx ended during the wait.
func (a *app) jitter(ctx context.Context) bool {
	d := startDelay(a.opts.startJitter, jitterFraction())
	if d > 0 {
		a.log.Info("start jitter: waiting before campaigning for the lease and ticking",
			"delay", d.Round(time.Millisecond).String(), "start_jitter", a.opts.startJitter.String())
	}
	return waitToStart(ctx, d)
}
