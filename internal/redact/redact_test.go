package redact_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"recond.dev/recond/internal/redact"
	"recond.dev/recond/internal/redact/redacttest"
)

// Every shape of value, in every form an output shows it, is removed from
// a text, and found in it.
func TestEveryShapeInEveryForm(t *testing.T) {
	for _, sh := range redacttest.Shapes(t) {
		s := redact.New([]string{sh.Value})
		for _, f := range sh.Forms(t) {
			t.Run(sh.Name+"/"+f.Name, func(t *testing.T) {
				text := "before " + f.Text + " after"
				out := s.Redact(text)
				if strings.Contains(out, sh.Secret()) || strings.Contains(out, f.Text) {
					t.Errorf("Redact(%q) = %q", text, out)
				}
				if !strings.Contains(out, redact.Mask) || !strings.HasPrefix(out, "before ") || !strings.HasSuffix(out, " after") {
					t.Errorf("Redact(%q) = %q, want the mask between the words around it", text, out)
				}
				if !s.Contains(text) {
					t.Errorf("Contains(%q) = false", text)
				}
			})
		}
	}
}

// A value shorter than MinLength is removed where it stands as a word of
// its own (the word rule), never from inside a word; a longer one from
// anywhere. The rule is the same for every script and for '-'.
func TestWordRule(t *testing.T) {
	s := redact.New([]string{"42", "ab", "né", "hunter2-long"})
	for _, tt := range []struct{ in, want string }{
		{"port 42 open", "port <redacted> open"},
		{"port-42", "port-<redacted>"},
		{"x.42/", "x.<redacted>/"},
		{"1425 and 421", "1425 and 421"},
		{"ab, abc, (ab) cab", "<redacted>, abc, (<redacted>) cab"},
		{"né-né nés", "<redacted>-<redacted> nés"},
		{"ab_c abé", "ab_c abé"},
		{"xhunter2-longx", "x<redacted>x"},
		{"", ""},
	} {
		if got := s.Redact(tt.in); got != tt.want {
			t.Errorf("Redact(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if got := s.Contains(tt.in); got != (tt.want != tt.in) {
			t.Errorf("Contains(%q) = %v", tt.in, got)
		}
	}
}

func TestIn(t *testing.T) {
	s := redact.New([]string{"hunter2-long", "42", "true", " ", "12345679"})
	for _, tt := range []struct {
		v    any
		want bool
	}{
		{"x hunter2-long y", true},
		{"42", true},
		{int64(42), true},
		{float64(12345679), true},
		{"1.2345679e+07", true},
		{"1425", false},
		{true, false}, // booleans are never secret
		{"true", false},
		{map[string]any{"a": []any{"b", map[string]any{"c": "hunter2-long"}}}, true},
		{map[string]any{"hunter2-long": "key"}, true},
		{map[string]any{"a": []any{"b", int64(7)}}, false},
		{nil, false},
	} {
		if got := s.In(tt.v); got != tt.want {
			t.Errorf("In(%#v) = %v, want %v", tt.v, got, tt.want)
		}
	}
	var none *redact.Set
	if none.In("hunter2-long") || none.Redact("hunter2-long") != "hunter2-long" || redact.New(nil, []string{"", "false", " "}) != nil {
		t.Error("an empty set finds something")
	}
}

// A multi-line value is found whole, whatever the indentation, and by its
// key material; Redact also removes its other lines, which Contains does
// not count (other texts hold the same armor lines and lines of JSON).
func TestMultiLine(t *testing.T) {
	body := "MIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4WGeKLs1Pt8Qu"
	pem := "-----BEGIN RSA PRIVATE KEY-----\n" + body + "\n-----END RSA PRIVATE KEY-----"
	conf := "{\n  \"enabled\": true,\n  \"password\": \"x\"\n}"
	s := redact.New([]string{pem, conf})
	for _, tt := range []struct {
		text string
		want bool
	}{
		{"ca.key: |\n    -----BEGIN RSA PRIVATE KEY-----\n    " + body + "\n    -----END RSA PRIVATE KEY-----\n", true},
		{"x" + body + "x", true},
		{"-----BEGIN RSA PRIVATE KEY-----\nMIIBpublic\n-----END RSA PRIVATE KEY-----", false},
		{"{\n  \"enabled\": true,\n  \"other\": 1\n}", false},
	} {
		if got := s.Contains(tt.text); got != tt.want {
			t.Errorf("Contains(%q) = %v, want %v", tt.text, got, tt.want)
		}
	}
	if got := s.Redact(`near "  \"password\": \"x\"" in conf`); strings.Contains(got, `password\": \"x`) {
		t.Errorf("a line of a multi-line value is left: %q", got)
	}
}

// Error keeps the error's chain and changes its text only.
func TestError(t *testing.T) {
	s := redact.New([]string{"Hunter2-xyz"})
	base := fmt.Errorf("apply: %w", context.DeadlineExceeded)
	err := fmt.Errorf("value Hunter2-xyz refused: %w", base)
	got := s.Error(err)
	if got.Error() != "value <redacted> refused: apply: context deadline exceeded" || !errors.Is(got, context.DeadlineExceeded) {
		t.Errorf("Error(%v) = %v", err, got)
	}
	if plain := errors.New("nothing"); s.Error(plain) != plain || s.Error(nil) != nil {
		t.Error("Error changed an error that holds no value")
	}
}

func TestSafeKey(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"DB_PASSWORD", "DB_PASSWORD"},
		{"tls.crt", "tls.crt"},
		{"DB_PASSWORD: Hunter2", "DB_PASSWORD…"},
		{"PIN Hunter2", "PIN…"},
		{" Hunter2", "…"},
		{"..Hunter2", "…"},
		{strings.Repeat("a", 254), "…"},
		{"", "…"},
		{"pässword", "p…"},
	} {
		if got := redact.SafeKey(tt.in); got != tt.want {
			t.Errorf("SafeKey(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
