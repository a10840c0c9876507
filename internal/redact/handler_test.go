package redact_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"recond.dev/recond/internal/redact"
	"recond.dev/recond/internal/redact/redacttest"
)

// Every record passes through the set: its message and every attribute,
// whatever its kind, in the JSON and the text handler; a handler without
// values passes records as they are.
func TestHandler(t *testing.T) {
	shapes := redacttest.Shapes(t)
	var values []string
	for _, sh := range shapes {
		values = append(values, sh.Value)
	}
	set := redact.New(values)
	for name, mk := range map[string]func(*bytes.Buffer) slog.Handler{
		"json": func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
		"text": func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
	} {
		var out bytes.Buffer
		log := slog.New(redact.NewHandler(mk(&out), func() *redact.Set { return set }))
		for _, sh := range shapes {
			for _, f := range sh.Forms(t) {
				log.With("bound", f.Text).WithGroup("g").Info("message "+f.Text,
					"string", f.Text, "error", errors.New("failed: "+f.Text), "bytes", []byte(f.Text),
					"any", map[string]string{"k": f.Text}, slog.Group("group", "inner", f.Text))
			}
		}
		for _, sh := range shapes {
			if strings.Contains(out.String(), sh.Secret()) {
				t.Errorf("%s: the log holds %s's value:\n%s", name, sh.Name, out.String())
			}
		}
		if !strings.Contains(out.String(), redact.Mask) {
			t.Errorf("%s: nothing masked:\n%s", name, out.String())
		}
	}
	var out bytes.Buffer
	slog.New(redact.NewHandler(slog.NewJSONHandler(&out, nil), func() *redact.Set { return nil })).Info("plain", "k", "v")
	if !strings.Contains(out.String(), `"msg":"plain","k":"v"`) {
		t.Errorf("without values: %s", out.String())
	}
}
