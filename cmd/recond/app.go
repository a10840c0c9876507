package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/lmittmann/tint"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/term"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"recond.dev/recond/events"
	"recond.dev/recond/leader"
	"recond.dev/recond/metrics"
	"recond.dev/recond/reconcile"
	"recond.dev/recond/reconcile/cluster"
	"recond.dev/recond/reconcile/diff"
	"recond.dev/recond/reconcile/health"
	"recond.dev/recond/reconcile/source"
	"recond.dev/recond/reconcile/watch"
	"recond.dev/recond/status"
	"recond.dev/recond/tracing"
	"recond.dev/recond/webhook"
)

// app is one configured recond: the wiring of flags to packages.
type app struct {
	opts    *options
	log     *slog.Logger
	rec     *reconcile.Reconciler
	tracer  *tracing.Provider
	reg     *prometheus.Registry
	metrics *metrics.Metrics
	coord   coordinationv1.CoordinationV1Interface
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

// changed hands a watch event on an owned object to the loop.
func (a *app) changed(ev watch.Event) { a.rec.Noticed(ev.Kind, ev.Name, ev.Subresource, ev.At) }

// watchLive is the watch cache as the reconciler's Live, reporting what
// observing cost.
type watchLive struct{ *watch.Cache }

// Cost implements reconcile.LiveCost.
func (w watchLive) Cost() reconcile.ObserveCost {
	s := w.Stats()
	return reconcile.ObserveCost{Calls: s.Gets, SyncWait: s.SyncWait, CacheAge: s.Age(), Restarts: s.Restarts}
}

func newApp(o *options, stderr io.Writer) (*app, error) {
	cmd := o.cmd
	log, err := newLogger(o.logFormat, o.logLevel, stderr)
	if err != nil {
		return nil, err
	}
	// Every record, recond's and client-go's, passes through the mask of
	// the values the reconciler decrypted (set once it is made).
	mask := &logMask{}
	log = slog.New(mask.handler(log.Handler())).With("namespace", o.namespace, "instance", o.name)
	// client-go's own log lines (klog) in the same format, to the same place.
	routeKlog(log.Handler())
	tp, err := tracing.New(context.Background(), tracing.Config{
		ServiceVersion: version, Namespace: o.namespace, PodName: os.Getenv("POD_NAME"),
	}, log)
	if err != nil {
		return nil, err
	}
	cfg, err := restConfig(o.kubeconfig)
	if err != nil {
		return nil, err
	}
	// client-go's default (5/s, burst 10) makes a first sync of a few hundred
	// objects (a dry run and an apply each) outlast the tick timeout.
	cfg.QPS, cfg.Burst = float32(o.kubeQPS), o.kubeBurst
	// Events have a client and a rate limit of their own, so that a first
	// sync's Events never take from the budget of its writes, and no span:
	// they are sent after the tick's trace ended.
	ecfg := events.ClientConfig(cfg)
	if tp.Enabled {
		// Every client-go request becomes a span under the LIST, GET or
		// apply that made it.
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return otelhttp.NewTransport(rt, otelhttp.WithTracerProvider(tp),
				otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
					return r.Method + " " + r.URL.Path
				}))
		})
	}
	kube, err := cluster.New(cfg, o.namespace)
	if err != nil {
		return nil, err
	}
	cacheDir := o.cacheDir
	if cacheDir == "" {
		cacheDir = filepath.Join(os.TempDir(), "recond-cache")
	}
	worker, err := o.worker.Worker(log)
	if err != nil {
		return nil, err
	}
	scfg := o.source
	scfg.URL, scfg.Ref, scfg.Path, scfg.CacheDir = o.repo, o.ref, o.path, cacheDir
	scfg.Worker, scfg.Helm = worker, helmConfig(o, kube, log)
	src, err := source.New(scfg)
	if err != nil {
		return nil, err
	}
	var rules *health.Rules
	if o.healthRules != "" {
		if rules, err = health.LoadRules(o.healthRules); err != nil {
			return nil, fmt.Errorf("--health-rules: %w", err)
		}
	}
	rcfg := o.rec
	rcfg.Namespace, rcfg.Name, rcfg.Path, rcfg.HealthRules = o.namespace, o.name, o.path, rules
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := metrics.New(reg, metrics.Options{Interval: o.interval, HealthTimeout: o.rec.HealthTimeout, Version: version})
	// Tracing first, so that the metrics and logs of a phase see its span.
	observers := []reconcile.Observer{m, reconcile.LogObserver{Log: log}}
	if tp.Enabled {
		observers = append([]reconcile.Observer{tracing.NewObserver(tp, o.namespace, o.name)}, observers...)
	}
	coord, err := coordinationv1.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	a := &app{opts: o, log: log, tracer: tp, reg: reg, metrics: m, coord: coord}
	if o.leaderElect && (cmd == "run" || cmd == "sync") {
		lc := a.leaderConfig()
		if cmd == "sync" {
			// One tick: it campaigns with renewals whatever the mode, and
			// so waits for a claimed Lease to be released.
			lc.Mode = leader.ModeRenew
		}
		lc.Failed = func(err error) {
			m.LeaseFailed(string(reconcile.Classify(err)))
			if f := a.leaseFailed; f != nil {
				f(err)
			}
		}
		a.elector = leader.New(lc, coord, log)
		// A process writes only while it holds the Lease as last observed.
		rcfg.MayWrite = a.elector.MayWrite
	}
	if cmd == "run" {
		// The ring behind the status page and GET /api/v1/ticks/{id}; after
		// tracing, so that it sees each tick's trace id.
		info := o.page
		info.Namespace, info.Instance, info.Repo, info.Ref, info.Path = o.namespace, o.name, src.DisplayURL(), o.ref, o.path
		info.Observe, info.Interval = o.observe, o.interval
		a.page = status.New(info, status.Options{Progress: func() reconcile.Progress { return a.rec.Progress() }})
		observers = append(observers, a.page)
	}
	if o.events && !o.rec.DryRun {
		cs, err := kubernetes.NewForConfig(ecfg)
		if err != nil {
			return nil, err
		}
		if a.events, err = events.New(cs, events.Options{Namespace: o.namespace, Instance: o.name, ReportingInstance: os.Getenv("POD_NAME"), Log: log, Recorded: m.EventRecorded}); err != nil {
			return nil, err
		}
		// Last, so that it sees the span of the tick (its trace id).
		observers = append(observers, a.events)
	}
	if o.observe == "watch" {
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		// The caches start with the first tick's observe, before its first
		// write, so that no drift is missed; they live as long as the app.
		wopts := o.watch
		wopts.Log, wopts.OnEvent = log, a.changed
		a.cache, err = watch.New(context.Background(), dyn, kube, o.namespace, wopts)
		if err != nil {
			return nil, err
		}
		rcfg.Live = watchLive{a.cache}
	}
	a.rec = reconcile.New(rcfg, src, kube, log, observers...)
	mask.from(a.rec.Secrets)
	a.progress = a.rec.Progress
	if o.webhookSecretFile != "" {
		secret, err := readSecretFile("--webhook-secret-file", o.webhookSecretFile)
		if err != nil {
			return nil, err
		}
		rec := a.rec
		a.webhook, err = webhook.New(webhook.Config{
			Secret: secret, Follows: follows(o.ref), Log: log, Observe: m.WebhookRequest,
			// A provider sends from a few addresses (behind an ingress, one):
			// generous enough for its bursts, still a bound on a flood.
			RatePerClient: 10, Burst: 100,
			Request: func(ctx context.Context, _ string) uint64 {
				return rec.Request(reconcile.TriggerWebhook, trace.SpanContextFromContext(ctx))
			},
		})
		if err != nil {
			return nil, err
		}
	}
	if o.syncTokenFile != "" {
		token, err := readSecretFile("--sync-token-file", o.syncTokenFile)
		if err != nil {
			return nil, err
		}
		a.syncAPI = newSyncAPI(token, a.rec.Request, log)
		a.suspendAPI = &suspendAPI{auth: a.syncAPI, rec: a.rec}
	}
	memLimit, memFrom := setMemoryLimit()
	log.Info("recond starting", "version", version, "repo", src.DisplayURL(), "ref", o.ref, "path", o.path,
		"memory_limit", memLimit, "memory_limit_from", memFrom,
		"interval", o.interval.String(), "observe", o.observe, "health_timeout", o.rec.HealthTimeout.String(), "health_rules", o.healthRules != "", "prune", o.rec.Prune, "self_heal", o.rec.SelfHeal, "dry_run", o.rec.DryRun)
	return a, nil
}

// restConfig follows --kubeconfig, then in-cluster, then $KUBECONFIG and
// ~/.kube/config.
func restConfig(path string) (*rest.Config, error) {
	if path != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
		}
		return cfg, nil
	}
	if cfg, err := rest.InClusterConfig(); err == nil {
		return cfg, nil
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		clientcmd.NewDefaultClientConfigLoadingRules(), &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("no in-cluster config and no kubeconfig: %w", err)
	}
	return cfg, nil
}

func newLogger(format, level string, w io.Writer) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	f, ok := w.(*os.File)
	tty := ok && term.IsTerminal(int(f.Fd()))
	if format == "auto" {
		format = "json"
		if tty {
			format = "text"
		}
	}
	switch format {
	case "json":
		return slog.New(tracing.LogHandler(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl}))), nil
	case "text":
		return slog.New(tracing.LogHandler(tint.NewHandler(w, &tint.Options{Level: lvl, TimeFormat: time.TimeOnly, NoColor: !tty}))), nil
	}
	return nil, fmt.Errorf("--log-format must be auto, text or json, not %q", format)
}

// run ticks until ctx is cancelled, serving /healthz and /readyz.
func (a *app) run(ctx context.Context) int {
	if a.opts.listen != "" {
		ln, err := net.Listen("tcp", a.opts.listen)
		if err != nil {
			a.log.Error("listen", "error", err)
			return 2
		}
		// Bounded in every way a client controls: headers, the time to send
		// them and the body, the time to read an answer, idle connections.
		srv := &http.Server{Handler: a.handler(), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 15 * time.Second,
			WriteTimeout: 30 * time.Second, IdleTimeout: 60 * time.Second, MaxHeaderBytes: 64 << 10,
			ErrorLog: slog.NewLogLogger(a.log.Handler(), slog.LevelDebug)}
		go func() { _ = srv.Serve(ln) }()
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		}()
		a.log.Info("serving", "address", ln.Addr().String())
	}
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
	if a.elector != nil {
		if err := a.elector.Run(ctx, a.observeRole, loop); err != nil {
			a.log.Error("leader election: stopping so that a restart rejoins as standby", "error", err)
			code = 1
		}
	} else {
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

// stallAfter is how long the running loop may go without starting a tick
// before /healthz fails: 3 intervals, or, when ticks may take longer, the
// longest a tick can take (its timeout and the time an abandoned phase is
// given) and an interval.
func (a *app) stallAfter() time.Duration {
	return max(3*a.opts.interval, a.opts.tickTimeout+reconcile.AbandonAfter+a.opts.interval)
}

// wedged says why the loop is wedged: it runs (this process leads) and has
// started no tick for stallAfter. "" when it is not.
func (a *app) wedged(now time.Time) string {
	since := a.loopSince.Load()
	if since == 0 {
		return "" // a standby, or not started yet: nothing to tick
	}
	last := time.Unix(0, since)
	p := a.progress()
	if p.StartedAt.After(last) {
		last = p.StartedAt
	}
	d := now.Sub(last)
	if d <= a.stallAfter() {
		return ""
	}
	msg := fmt.Sprintf("the loop has started no tick for %s (limit %s)", d.Round(time.Second), a.stallAfter())
	if p.Strays > 0 {
		msg += fmt.Sprintf("; %d phase(s) of abandoned ticks still running", p.Strays)
	}
	if p.Running {
		msg += fmt.Sprintf("; tick %d still running", p.Started)
	}
	return msg + "\n"
}

func (a *app) leaderConfig() leader.Config {
	lc := a.opts.lease
	lc.Namespace, lc.Lease = a.opts.namespace, reconcile.LeaseName(a.opts.name)
	return lc
}

// leading reports whether this process leads its instance, and otherwise
// who does (as far as it knows).
func (a *app) leading() (bool, string) {
	s := a.role.Load()
	if s == nil {
		return false, "not known yet"
	}
	if !s.Leading && s.Holder == "" {
		return false, "not known yet"
	}
	if !s.Leading && !s.WaitUntil.IsZero() {
		return false, "this process (taking over a Lease deleted and created again, it ticks from " + s.WaitUntil.Format(time.RFC3339) + ")"
	}
	return s.Leading, s.Holder
}

// observeRole records whether this process leads, for /readyz and the
// recond_leader gauge.
func (a *app) observeRole(s leader.State) {
	a.role.Store(&s)
	a.metrics.SetLeader(s.Leading)
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

// traced gives a request a server span when tracing is on, a child of the
// caller's W3C traceparent when it sends one, so that the tick it asks for
// can link to it.
func (a *app) traced(name string, h http.Handler) http.Handler {
	if !a.tracer.Enabled {
		return h
	}
	return otelhttp.NewHandler(h, name, otelhttp.WithTracerProvider(a.tracer), otelhttp.WithPropagators(propagation.TraceContext{}))
}

func (a *app) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{
		EnableOpenMetrics: true, Registry: a.reg, ErrorLog: slog.NewLogLogger(a.log.Handler(), slog.LevelError),
	}))
	if a.webhook != nil {
		mux.Handle("POST /hooks/git", a.traced("POST /hooks/git", leading(a.leading, a.webhook)))
	}
	if a.page != nil {
		switch {
		case a.opts.statusPage:
			mux.Handle("GET /api/v1/ticks/{id}", a.page.TicksHandler())
		case a.syncAPI != nil:
			// Without the page, a tick's details are for the token's holder.
			mux.Handle("GET /api/v1/ticks/{id}", a.syncAPI.requireToken(a.page.TicksHandler()))
		}
		if a.opts.statusPage {
			page := a.page.Handler()
			mux.Handle("GET /{$}", page)
			mux.Handle("GET /ticks/{id}", page)
			mux.Handle("GET /api/v1/status", page)
		}
	}
	if a.syncAPI != nil {
		mux.Handle("POST /api/v1/sync", a.traced("POST /api/v1/sync", leading(a.leading, a.syncAPI)))
	}
	if a.suspendAPI != nil {
		// Any process: the suspension is written where the leader reads it.
		mux.Handle("POST /api/v1/suspend", a.traced("POST /api/v1/suspend", a.suspendAPI.handler(false)))
		mux.Handle("POST /api/v1/resume", a.traced("POST /api/v1/resume", a.suspendAPI.handler(true)))
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		// Alive is not the same as ticks succeeding (/readyz, the alerts):
		// only a loop that starts no tick is one a restart can help.
		if msg := a.wedged(time.Now()); msg != "" {
			http.Error(w, msg, http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		// A standby is ready: it is doing its job, which is to wait. It
		// says so, and whom it waits for.
		// (Before the first observation of the Lease the process is neither:
		// it is not ready until it leads and a tick succeeded, or it knows
		// whom it waits for.)
		s := a.role.Load()
		if a.elector != nil && (s == nil || !s.Leading) {
			// A Lease it may not read or write: the process can neither
			// lead nor know whom it waits for.
			if err := a.elector.Err(); err != nil {
				http.Error(w, fmt.Sprintf("cannot campaign for the lease: %v", err), http.StatusServiceUnavailable)
				return
			}
		}
		if s != nil && !s.Leading && !s.WaitUntil.IsZero() {
			_, _ = fmt.Fprintf(w, "taking over: lease %s, deleted and created again, now held by this process; first write at %s, once the old holder has given up\n",
				reconcile.LeaseName(a.opts.name), s.WaitUntil.Format(time.RFC3339))
			return
		}
		if s != nil && !s.Leading && s.Holder != "" {
			_, _ = fmt.Fprintf(w, "standby: lease %s held by %s\n", reconcile.LeaseName(a.opts.name), s.Holder)
			return
		}
		if !a.ready.Load() {
			http.Error(w, "no successful tick yet", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	return mux
}

func exitCode(r *reconcile.Result) int {
	if r.Failure() != nil {
		return 1
	}
	return 0
}

// diffJSON is the shape of `recond diff --output json`.
type diffJSON struct {
	Revision string       `json:"revision"`
	Changes  []changeJSON `json:"changes"`
	// Skipped are the objects a per-object opt-out holds back.
	Skipped []reconcile.Skip `json:"skipped,omitempty"`
	// Hooks are what each of the revision's chart hooks would create and
	// delete, and what the write gate would refuse.
	Hooks []reconcile.HookPlan `json:"hooks,omitempty"`
}

type changeJSON struct {
	Kind   string           `json:"kind"`
	Name   string           `json:"name"`
	Action diff.Action      `json:"action"`
	Fields []diff.FieldDiff `json:"fields,omitempty"`
}

func (a *app) diff(ctx context.Context, stdout io.Writer) int {
	defer a.flush()
	tctx, cancel := context.WithTimeout(ctx, a.opts.tickTimeout)
	defer cancel()
	r := a.rec.Plan(tctx)
	if f := r.Failure(); f != nil {
		return 2
	}
	if a.opts.output == "json" {
		out := diffJSON{Revision: r.Revision, Changes: []changeJSON{}, Skipped: r.Skipped, Hooks: r.Hooks}
		for _, c := range r.Changes {
			out.Changes = append(out.Changes, changeJSON{Kind: c.Kind, Name: c.Name, Action: c.Action, Fields: c.Fields})
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(out); err != nil {
			return 2
		}
	} else {
		for _, c := range r.Changes {
			fmt.Fprintln(stdout, strings.TrimRight(c.String(), "\n"))
		}
		for _, s := range r.Skipped {
			fmt.Fprintln(stdout, "skipped "+s.String())
		}
		for _, h := range r.Hooks {
			fmt.Fprintln(stdout, h.String())
		}
	}
	if len(r.Changes) > 0 {
		return 1
	}
	return 0
}

// helmConfig is how a chart at --path is rendered: the release (--name
// unless --helm-release), recond's namespace, the API server's
// capabilities and the instance's seed (Secret recond-seed-<name>).
func helmConfig(o *options, kube *cluster.Client, log *slog.Logger) source.Helm {
	h := source.Helm{HelmOptions: o.source.Helm.HelmOptions, Namespace: o.namespace, Capabilities: kube.Capabilities, Log: log}
	if h.Release == "" {
		h.Release = o.name
	}
	seed := reconcile.SeedPrefix + o.name
	// recond diff and --dry-run write nothing: they read the seed, and a
	// chart that needs one before any run made it fails to render.
	create := !o.rec.DryRun && (o.cmd == "run" || o.cmd == "sync")
	h.Seed = func(ctx context.Context) ([]byte, error) { return kube.Seed(ctx, seed, create) }
	return h
}
