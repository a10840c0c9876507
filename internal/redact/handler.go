package redact

import (
	"context"
	"fmt"
	"log/slog"
)

// NewHandler returns a slog.Handler that passes every record through the
// Set set returns before next sees it: the message, and every attribute's
// value, a string, an error's text, a group's members, any other value as
// fmt prints it when that holds a secret value (the value then becomes the
// redacted text). set is asked at every record (and at every WithAttrs,
// for the attributes it binds), as the values known change with every
// revision rendered; it may return nil.
func NewHandler(next slog.Handler, set func() *Set) slog.Handler {
	return &handler{next: next, set: set}
}

type handler struct {
	next slog.Handler
	set  func() *Set
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	s := h.set()
	if s == nil {
		return h.next.Handle(ctx, r)
	}
	out := slog.NewRecord(r.Time, r.Level, s.Redact(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(s.Attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	if s := h.set(); s != nil {
		masked := make([]slog.Attr, len(as))
		for i, a := range as {
			masked[i] = s.Attr(a)
		}
		as = masked
	}
	return &handler{next: h.next.WithAttrs(as), set: h.set}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{next: h.next.WithGroup(name), set: h.set}
}

// Attr returns a with every secret value of s removed from its value
// (see NewHandler).
func (s *Set) Attr(a slog.Attr) slog.Attr {
	if s == nil {
		return a
	}
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, s.Redact(v.String()))
	case slog.KindGroup:
		g := v.Group()
		out := make([]slog.Attr, len(g))
		for i, m := range g {
			out[i] = s.Attr(m)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(out...)}
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return slog.String(a.Key, s.Redact(x.Error()))
		case []byte:
			// A JSON handler writes it in base64, a text handler as it is.
			if t := string(x); s.Contains(t) || s.Redact(t) != t {
				return slog.String(a.Key, s.Redact(t))
			}
			return a
		}
		text := fmt.Sprintf("%+v", v.Any())
		if out := s.Redact(text); out != text {
			return slog.String(a.Key, out)
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
