package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"k8s.io/klog/v2"

	"recond.dev/recond/internal/redact"
	"recond.dev/recond/reconcile/diff"
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
// rate limiter, and from --log-level debug-4 down the requests it makes)
// through h, the handler of recond's own log (which passes every record
// through the mask, logMask): one format per process, each line marked
// source=client-go.
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

// clientGoRecord is r with the body of a request or a response that
// client-go logs (at its verbosity 8, from --log-level debug-4 down,
// through klog or through a logger in a request's context: the Events'
// and the Lease's clients have recond's) as clientGoBody shows it.
func clientGoRecord(r slog.Record) slog.Record {
	if r.Message != "Request Body" && r.Message != "Response Body" {
		return r
	}
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "body" {
			a = slog.String("body", clientGoBody(a.Value.Resolve().String()))
		}
		out.AddAttrs(a)
		return true
	})
	return out
}

// clientGoBody is a request's or a response's body as recond's log shows
// it: as it is only when it is a whole JSON document (not cut by
// client-go, not a dump of protobuf) that names no Secret ("secret" in any
// case: a Secret, a list of them, the API server's message about one) and
// holds no object recond wrote with a decrypted value in it (its
// diff.MaskedFieldsAnnotation, whose old values no process may know any
// more); else its length alone. What is shown still passes through the
// mask of recond's log, which removes the values the process knows.
func clientGoBody(body string) string {
	switch {
	case !json.Valid([]byte(body)):
		return fmt.Sprintf("(%d bytes not shown: cut, or not JSON, it cannot be told to hold no secret)", len(body))
	case strings.Contains(strings.ToLower(body), "secret"):
		return fmt.Sprintf("(%d bytes not shown: about a Secret)", len(body))
	case strings.Contains(body, diff.MaskedFieldsAnnotation):
		return fmt.Sprintf("(%d bytes not shown: an object that holds a decrypted value)", len(body))
	}
	return body
}

// logMask is the mask recond's log passes every record through (its own
// and client-go's): client-go's bodies as clientGoBody shows them, then
// the value set of the app's reconciler, once there is one.
type logMask struct {
	secrets atomic.Pointer[func() *redact.Set]
}

// handler is h with every record passed through the mask.
func (m *logMask) handler(h slog.Handler) slog.Handler {
	return bodies{redact.NewHandler(h, m.set)}
}

// bodies is a handler that passes records to the next as clientGoRecord
// makes them.
type bodies struct{ next slog.Handler }

func (b bodies) Enabled(ctx context.Context, l slog.Level) bool { return b.next.Enabled(ctx, l) }

func (b bodies) Handle(ctx context.Context, r slog.Record) error {
	return b.next.Handle(ctx, clientGoRecord(r))
}

func (b bodies) WithAttrs(as []slog.Attr) slog.Handler { return bodies{b.next.WithAttrs(as)} }
func (b bodies) WithGroup(name string) slog.Handler    { return bodies{b.next.WithGroup(name)} }

// from makes secrets the mask's value set.
func (m *logMask) from(secrets func() *redact.Set) { m.secrets.Store(&secrets) }

func (m *logMask) set() *redact.Set {
	if p := m.secrets.Load(); p != nil {
		return (*p)()
	}
	return nil
}
