package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/lmittmann/tint"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/term"

	"recond.dev/recond/metrics"
	"recond.dev/recond/reconcile"
	"recond.dev/recond/tracing"
)

// newLog is recond's log (--log-format, --log-level) and the mask every
// record passes through, recond's and client-go's: the values the
// reconciler decrypted, once it is made (parts.reconciler).
func newLog(o *options, stderr io.Writer) (*slog.Logger, *logMask, error) {
	log, err := newLogger(o.logFormat, o.logLevel, stderr)
	if err != nil {
		return nil, nil, err
	}
	mask := &logMask{}
	log = slog.New(mask.handler(log.Handler())).With("namespace", o.namespace, "instance", o.name)
	// client-go's own log lines (klog) in the same format, to the same place.
	routeKlog(log.Handler())
	return log, mask, nil
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

// newMetrics is the registry /metrics serves: the Go runtime's and the
// process's collectors, and recond's own metrics.
func newMetrics(o *options) (*prometheus.Registry, *metrics.Metrics) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := metrics.New(reg, metrics.Options{Interval: o.interval, HealthTimeout: o.rec.HealthTimeout, Version: version})
	return reg, m
}

// observers are the reconciler's observers every command has: tracing
// first, so that the metrics and logs of a phase see its span. A command's
// build appends its own (the status page, Events).
func observers(o *options, tp *tracing.Provider, m *metrics.Metrics, log *slog.Logger) []reconcile.Observer {
	obs := []reconcile.Observer{m, reconcile.LogObserver{Log: log}}
	if tp.Enabled {
		obs = append([]reconcile.Observer{tracing.NewObserver(tp, o.namespace, o.name)}, obs...)
	}
	return obs
}
