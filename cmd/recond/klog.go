package main

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	"k8s.io/klog/v2"
)

// klogTarget is the handler client-go's klog output goes to: that of the
// app made last. klog is process-wide, so this is too; it is set once with
// klog.SetSlogLogger and only the target moves (klog's setter is not safe
// while others log).
var (
	klogTarget atomic.Pointer[slog.Handler]
	klogOnce   sync.Once
)

// routeKlog sends client-go's log lines (reflectors, leader election, the
// rate limiter) through h, the handler of recond's own log: one format per
// process, each line marked source=client-go.
func routeKlog(h slog.Handler) {
	klogTarget.Store(&h)
	klogOnce.Do(func() { klog.SetSlogLogger(slog.New(klogForward{})) })
}

// klogForward is a handler that forwards to klogTarget, replaying the
// attributes and groups it was given.
type klogForward struct {
	with []func(slog.Handler) slog.Handler
}

func (f klogForward) target() slog.Handler {
	p := klogTarget.Load()
	if p == nil {
		return slog.DiscardHandler
	}
	h := (*p).WithAttrs([]slog.Attr{slog.String("source", "client-go")})
	for _, w := range f.with {
		h = w(h)
	}
	return h
}

func (f klogForward) Enabled(ctx context.Context, l slog.Level) bool {
	return f.target().Enabled(ctx, l)
}

func (f klogForward) Handle(ctx context.Context, r slog.Record) error {
	return f.target().Handle(ctx, r)
}

func (f klogForward) WithAttrs(as []slog.Attr) slog.Handler {
	return klogForward{with: append(f.with[:len(f.with):len(f.with)], func(h slog.Handler) slog.Handler { return h.WithAttrs(as) })}
}

func (f klogForward) WithGroup(name string) slog.Handler {
	return klogForward{with: append(f.with[:len(f.with):len(f.with)], func(h slog.Handler) slog.Handler { return h.WithGroup(name) })}
}
