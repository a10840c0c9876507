package main

import (
	"context"
	"fmt"
	"net/http"
	"os"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"k8s.io/client-go/dynamic"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	eventsv1 "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"recond.dev/recond/events"
	"recond.dev/recond/leader"
	"recond.dev/recond/reconcile"
	"recond.dev/recond/reconcile/watch"
	"recond.dev/recond/tracing"
)

// clusterConfig is the API server's config (--kubeconfig, --kube-api-qps,
// --kube-api-burst) for the clients that trace their requests, and the
// config of the Events client.
func clusterConfig(o *options, tp *tracing.Provider) (cfg, eventsCfg *rest.Config, err error) {
	cfg, err = restConfig(o.kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	// client-go's default (5/s, burst 10) makes a first sync of a few hundred
	// objects (a dry run and an apply each) outlast the tick timeout.
	cfg.QPS, cfg.Burst = float32(o.kubeQPS), o.kubeBurst
	// Events have a client and a rate limit of their own, so that a first
	// sync's Events never take from the budget of its writes, and no span:
	// they are sent after the tick's trace ended.
	eventsCfg = events.ClientConfig(cfg)
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
	return cfg, eventsCfg, nil
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

// leaderConfig is the election of the instance's Lease as the flags set it.
func (a *app) leaderConfig() leader.Config {
	lc := a.opts.lease
	lc.Namespace, lc.Lease = a.opts.namespace, reconcile.LeaseName(a.opts.name)
	return lc
}

// elect makes, with --leader-elect, the elector that campaigns for the
// instance's Lease as lc says: a process writes only while it holds the
// Lease as last observed.
func (p *parts) elect(a *app, lc leader.Config) error {
	if !a.opts.leaderElect {
		return nil
	}
	coord, err := coordinationv1.NewForConfig(p.cfg)
	if err != nil {
		return err
	}
	lc.Failed = func(err error) {
		a.metrics.LeaseFailed(string(reconcile.Classify(err)))
		if f := a.leaseFailed; f != nil {
			f(err)
		}
	}
	a.elector = leader.New(lc, coord, a.log)
	p.rcfg.MayWrite = a.elector.MayWrite
	return nil
}

// addEvents makes the observer that sends Kubernetes Events (--events; none
// with --dry-run). Last of the observers, so that it sees the span of the
// tick (its trace id).
func (p *parts) addEvents(a *app) error {
	o := a.opts
	if !o.events || o.rec.DryRun {
		return nil
	}
	// The events.k8s.io/v1 client alone: the clientset would link every API
	// group's client.
	ec, err := eventsv1.NewForConfig(p.eventsCfg)
	if err != nil {
		return err
	}
	if a.events, err = events.New(ec, events.Options{Namespace: o.namespace, Instance: o.name, ReportingInstance: os.Getenv("POD_NAME"), Log: a.log, Recorded: a.metrics.EventRecorded}); err != nil {
		return err
	}
	p.observers = append(p.observers, a.events)
	return nil
}

// addWatch makes, with --observe=watch, the watch caches the observe phase
// reads instead of listing. They start with the first tick's observe,
// before its first write, so that no drift is missed; they live as long as
// the app. A change by someone else they see asks for a tick.
func (p *parts) addWatch(a *app) error {
	o := a.opts
	if o.observe != "watch" {
		return nil
	}
	dyn, err := dynamic.NewForConfig(p.cfg)
	if err != nil {
		return err
	}
	wopts := o.watch
	wopts.Log, wopts.OnEvent = a.log, p.later.noticed
	if a.cache, err = watch.New(context.Background(), dyn, p.kube, o.namespace, wopts); err != nil {
		return err
	}
	p.rcfg.Live = watchLive{a.cache}
	return nil
}

// watchLive is the watch cache as the reconciler's Live, reporting what
// observing cost.
type watchLive struct{ *watch.Cache }

// Cost implements reconcile.LiveCost.
func (w watchLive) Cost() reconcile.ObserveCost {
	s := w.Stats()
	return reconcile.ObserveCost{Calls: s.Gets, SyncWait: s.SyncWait, CacheAge: s.Age(), Restarts: s.Restarts}
}
