package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"recond.dev/recond/reconcile"
	"recond.dev/recond/webhook"
)

// endpoints makes, once the reconciler is, the handlers that ask it for
// ticks: POST /hooks/git (--webhook-secret-file), and POST /api/v1/sync,
// /api/v1/suspend and /api/v1/resume (--sync-token-file).
func (a *app) endpoints() error {
	o, rec := a.opts, a.rec
	if o.webhookSecretFile != "" {
		secret, err := readSecretFile("--webhook-secret-file", o.webhookSecretFile)
		if err != nil {
			return err
		}
		a.webhook, err = webhook.New(webhook.Config{
			Secret: secret, Follows: follows(o.ref), Log: a.log, Observe: a.metrics.WebhookRequest,
			// A provider sends from a few addresses (behind an ingress, one):
			// generous enough for its bursts, still a bound on a flood.
			RatePerClient: 10, Burst: 100,
			Request: func(ctx context.Context, _ string) uint64 {
				return rec.Request(reconcile.TriggerWebhook, trace.SpanContextFromContext(ctx))
			},
		})
		if err != nil {
			return err
		}
	}
	if o.syncTokenFile != "" {
		token, err := readSecretFile("--sync-token-file", o.syncTokenFile)
		if err != nil {
			return err
		}
		a.syncAPI = newSyncAPI(token, rec.Request, a.log)
		a.suspendAPI = &suspendAPI{auth: a.syncAPI, rec: rec}
	}
	return nil
}

// serve serves handler on --listen (nothing when it is empty) until stop,
// which gives the requests in flight 5 s.
func (a *app) serve() (stop func(), err error) {
	if a.opts.listen == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", a.opts.listen)
	if err != nil {
		return nil, err
	}
	// Bounded in every way a client controls: headers, the time to send
	// them and the body, the time to read an answer, idle connections.
	srv := &http.Server{Handler: a.handler(), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 15 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 60 * time.Second, MaxHeaderBytes: 64 << 10,
		ErrorLog: slog.NewLogLogger(a.log.Handler(), slog.LevelDebug)}
	go func() { _ = srv.Serve(ln) }()
	a.log.Info("serving", "address", ln.Addr().String())
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}, nil
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
	mux.HandleFunc("GET /healthz", a.healthz)
	mux.HandleFunc("GET /readyz", a.readyz)
	return mux
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

// healthz is GET /healthz. Alive is not the same as ticks succeeding
// (/readyz, the alerts): only a loop that starts no tick is one a restart
// can help.
func (a *app) healthz(w http.ResponseWriter, _ *http.Request) {
	if msg := a.wedged(time.Now()); msg != "" {
		http.Error(w, msg, http.StatusServiceUnavailable)
		return
	}
	_, _ = io.WriteString(w, "ok\n")
}

// readyz is GET /readyz. A standby is ready: it is doing its job, which is
// to wait. It says so, and whom it waits for. (Before the first
// observation of the Lease the process is neither: it is not ready until
// it leads and a tick succeeded, or it knows whom it waits for.)
func (a *app) readyz(w http.ResponseWriter, _ *http.Request) {
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
