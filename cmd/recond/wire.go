package main

import (
	"context"
	"io"
	"os"
	"sync/atomic"

	"k8s.io/client-go/rest"

	"recond.dev/recond/reconcile"
	"recond.dev/recond/reconcile/cluster"
	"recond.dev/recond/reconcile/watch"
	"recond.dev/recond/tracing"
)

// parts are what run, sync and diff all use, made from the flags before
// the command's build adds its own: the clients, the source, and the
// reconciler's config and observers so far.
type parts struct {
	// cfg is the API server's config for the clients that trace their
	// requests; eventsCfg that of the Events client (no spans, a rate
	// limit of its own).
	cfg, eventsCfg *rest.Config
	kube           *cluster.Client
	src            reconcile.Source
	rcfg           reconcile.Config
	observers      []reconcile.Observer
	mask           *logMask
	// later is the reconciler for what calls it but must be made before it.
	later *later
}

// newParts makes the app and the parts every command that ticks uses.
func newParts(o *options, stderr io.Writer) (*app, *parts, error) {
	log, mask, err := newLog(o, stderr)
	if err != nil {
		return nil, nil, err
	}
	tp, err := tracing.New(context.Background(), tracing.Config{
		ServiceVersion: version, Namespace: o.namespace, PodName: os.Getenv("POD_NAME"),
	}, log)
	if err != nil {
		return nil, nil, err
	}
	cfg, eventsCfg, err := clusterConfig(o, tp)
	if err != nil {
		return nil, nil, err
	}
	kube, err := cluster.New(cfg, o.namespace)
	if err != nil {
		return nil, nil, err
	}
	src, err := newSource(o, kube, log)
	if err != nil {
		return nil, nil, err
	}
	rcfg, err := reconcilerConfig(o)
	if err != nil {
		return nil, nil, err
	}
	reg, m := newMetrics(o)
	a := &app{opts: o, log: log, tracer: tp, reg: reg, metrics: m}
	p := &parts{cfg: cfg, eventsCfg: eventsCfg, kube: kube, src: src, rcfg: rcfg, mask: mask, later: &later{},
		observers: observers(o, tp, m, log)}
	return a, p, nil
}

// reconciler makes a's reconciler, the last part: from the config and
// observers the command's build completed. What was made before it and
// calls it (the log's mask, the watch cache, the status page) is bound to
// it here.
func (p *parts) reconciler(a *app) {
	a.rec = reconcile.New(p.rcfg, p.src, p.kube, a.log, p.observers...)
	p.mask.from(a.rec.Secrets)
	p.later.bind(a.rec)
	a.progress = a.rec.Progress
}

// later is the reconciler to what must exist before reconcile.New and
// calls the reconciler: the watch cache (its Live) hands it events, the
// status page (one of its observers) asks it where the loop is. Neither
// calls before the first tick, which starts the caches, nor before the
// server starts; one that did would find no reconciler rather than a nil
// one (no event to hand, no progress).
type later struct {
	rec atomic.Pointer[reconcile.Reconciler]
}

func (l *later) bind(rec *reconcile.Reconciler) { l.rec.Store(rec) }

// noticed hands a watch event on an owned object to the loop.
func (l *later) noticed(ev watch.Event) {
	if rec := l.rec.Load(); rec != nil {
		rec.Noticed(ev.Kind, ev.Name, ev.Subresource, ev.At)
	}
}

// progress is where the loop is.
func (l *later) progress() reconcile.Progress {
	if rec := l.rec.Load(); rec != nil {
		return rec.Progress()
	}
	return reconcile.Progress{}
}
