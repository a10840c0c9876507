package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"recond.dev/recond/events"
	"recond.dev/recond/leader"
	"recond.dev/recond/metrics"
	"recond.dev/recond/reconcile"
	"recond.dev/recond/reconcile/watch"
	"recond.dev/recond/status"
	"recond.dev/recond/tracing"
)

// app is one configured recond run, sync or diff: the wiring of flags to
// packages. newApp makes the parts the three share (newParts), then the
// command's build (run.go, sync.go, diff.go) adds what it uses, and the
// reconciler last.
type app struct {
	opts    *options
	log     *slog.Logger
	rec     *reconcile.Reconciler
	tracer  *tracing.Provider
	reg     *prometheus.Registry
	metrics *metrics.Metrics
	ready   atomic.Bool
	// loopSince is when the loop started (Unix ns; 0 while it does not
	// run: a standby); progress is where it is (the Reconciler's).
	loopSince atomic.Int64
	progress  func() reconcile.Progress
	// role is this process's leader.State (nil before the election).
	role atomic.Pointer[leader.State]
	// elector campaigns for the instance's Lease and gates every write
	// (nil with --leader-elect=false, and for diff).
	elector *leader.Elector
	// leaseFailed, when set, is told every failed request on the Lease
	// (sync stops at the first).
	leaseFailed func(error)
	// cache feeds observe with --observe=watch (nil with list).
	cache *watch.Cache
	// events sends Kubernetes Events (nil with --events=false).
	events *events.Observer
	// syncAPI serves POST /api/v1/sync (nil without --sync-token-file).
	syncAPI *syncAPI
	// suspendAPI serves POST /api/v1/suspend and /api/v1/resume (nil
	// without --sync-token-file).
	suspendAPI *suspendAPI
	// webhook serves POST /hooks/git (nil without --webhook-secret-file).
	webhook http.Handler
	// page is the status page and the tick states (recond run only).
	page *status.Page
}

// builds are what each command that ticks adds to the parts every one
// uses; each ends by making the reconciler (parts.reconciler).
var builds = map[string]func(*app, *parts) error{
	"run":  (*app).buildRun,
	"sync": (*app).buildSync,
	"diff": (*app).buildDiff,
}

// newApp makes the recond of o.cmd (run, sync or diff).
func newApp(o *options, stderr io.Writer) (*app, error) {
	a, p, err := newParts(o, stderr)
	if err != nil {
		return nil, err
	}
	if err := builds[o.cmd](a, p); err != nil {
		return nil, err
	}
	memLimit, memFrom := setMemoryLimit()
	a.log.Info("recond starting", "version", version, "repo", p.src.DisplayURL(), "ref", o.ref, "path", o.path,
		"memory_limit", memLimit, "memory_limit_from", memFrom,
		"interval", o.interval.String(), "observe", o.observe, "health_timeout", o.rec.HealthTimeout.String(), "health_rules", o.healthRules != "", "prune", o.rec.Prune, "self_heal", o.rec.SelfHeal, "dry_run", o.rec.DryRun)
	return a, nil
}

// withApp parses the flags of cmd (run, sync or diff), makes its app and
// runs do with it. It exits 0 after -h, 2 on any error before do.
func withApp(cmd string, args []string, stderr io.Writer, do func(*app) int) int {
	opts, err := parseFlags(cmd, args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	var a *app
	if err == nil {
		a, err = newApp(opts, stderr)
	}
	if err != nil {
		fmt.Fprintf(stderr, "recond %s: %v\n", cmd, err)
		return 2
	}
	return do(a)
}

// flush sends the Events and exports the spans not yet sent, each within
// 5 s of its own.
func (a *app) flush() {
	if a.events != nil {
		ectx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := a.events.Shutdown(ectx); err != nil {
			a.log.Warn("send Events", "error", err)
		}
		cancel()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.tracer.Shutdown(ctx); err != nil {
		a.log.Warn("flush traces", "error", err)
	}
}

// exitCode is 0 for a tick that succeeded, 1 for one that failed.
func exitCode(r *reconcile.Result) int {
	if r.Failure() != nil {
		return 1
	}
	return 0
}
