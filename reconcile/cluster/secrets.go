package cluster

import (
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"recond.dev/recond/internal/redact"
)

// SecretError is the error of a request about a Secret. The API server's
// message may quote a value of the Secret: an admission webhook's message
// may hold anything, and a key the API refuses is quoted whole, though a
// key is often a value written the wrong way ("DB_PASSWORD: Hunter2" on an
// env file's line makes that whole line a key). So its text says the
// object, the API's reason and code and each cause's type and field path,
// a key cut before its first character a key may not hold; never the
// server's message. Every output (log, span, Event, status page, recond
// diff) shows this text. Unwrap returns the server's error for errors.Is
// and errors.As (the reason is classified from it); its own text must not
// be shown.
type SecretError struct {
	// Op is what was asked ("apply"), Name the Secret.
	Op, Name string
	text     string
	err      error
}

func (e *SecretError) Error() string { return e.text }

// Unwrap returns the API server's error.
func (e *SecretError) Unwrap() error { return e.err }

// secretSafe returns err, the error of op on obj, as a *SecretError when
// obj is a core Secret and err carries an API status; otherwise err.
// An error without an API status (a cancellation, a connection refused)
// names URLs and the object, not its content, and is kept.
func secretSafe(op string, obj *unstructured.Unstructured, err error) error {
	if obj.GetKind() != "Secret" || obj.GroupVersionKind().Group != "" {
		return err
	}
	return conceal(op, obj, err, "about a Secret is not shown: it may quote a value")
}

// concealed is secretSafe for any object: its error is a *SecretError
// when obj is a Secret or s says it holds a decrypted value, and its text
// loses every decrypted value s knows.
func concealed(op string, obj *unstructured.Unstructured, err error, s Sensitive) error {
	se := secretSafe(op, obj, err)
	if se == err && err != nil && s != nil && s.Holds(obj) {
		se = conceal(op, obj, err, "is not shown: the object holds a decrypted value, which it may quote")
	}
	var e *SecretError
	if s != nil && errors.As(se, &e) && se != err {
		e.text = s.Redact(e.text)
	}
	return se
}

// conceal returns err as a *SecretError when it carries an API status.
func conceal(op string, obj *unstructured.Unstructured, err error, why string) error {
	var status apierrors.APIStatus
	if err == nil || !errors.As(err, &status) {
		return err
	}
	st := status.Status()
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s/%s: %s (%d)", op, obj.GetKind(), obj.GetName(), safeText(string(apierrors.ReasonForError(err)), "unknown reason"), st.Code)
	if strings.Contains(st.Message, "illegal base64 data") {
		// A fixed phrase of the API server (a value under data that is
		// not base64), quoting nothing; classification reads it.
		b.WriteString(": data is not base64 (illegal base64 data)")
	}
	if d := st.Details; d != nil {
		n := 0
		for _, c := range d.Causes {
			if c.Field == "" && c.Type == "" {
				continue // only a message
			}
			if n == 10 {
				b.WriteString("; and more causes")
				break
			}
			sep := ": "
			if n > 0 {
				sep = "; "
			}
			n++
			b.WriteString(sep + safeField(c.Field) + " " + safeText(string(c.Type), "cause"))
		}
	}
	b.WriteString(" (the API server's message " + why + ")")
	return &SecretError{Op: op, Name: obj.GetName(), text: b.String(), err: err}
}

// safeField writes an API field path ("data[DB_PASSWORD: Hunter2]") with
// every key in brackets as redact.SafeKey shows it ("data[DB_PASSWORD…]"),
// and the path outside brackets cut at any character a field name does
// not have.
func safeField(f string) string {
	if f == "" {
		return "(object)"
	}
	var b strings.Builder
	for f != "" {
		open := strings.IndexByte(f, '[')
		if open < 0 {
			b.WriteString(safeText(f, ""))
			break
		}
		b.WriteString(safeText(f[:open], ""))
		rest := f[open+1:]
		end := strings.LastIndexByte(rest, ']')
		if next := strings.IndexByte(rest, '['); next >= 0 && next < end {
			// Keys hold no '[': a later bracket belongs to another segment.
			end = strings.IndexByte(rest, ']')
		}
		if end < 0 {
			b.WriteString("[" + redact.SafeKey(rest) + "]")
			break
		}
		b.WriteString("[" + redact.SafeKey(rest[:end]) + "]")
		f = rest[end+1:]
	}
	return b.String()
}

// safeText is s cut at its first character a key may not hold
// (redact.KeyRune) but '/' (names, types and reasons hold no other); def
// when nothing is left.
func safeText(s, def string) string {
	for i, r := range s {
		if !redact.KeyRune(r) && r != '/' {
			s = s[:i] + "…"
			break
		}
	}
	if s == "" || s == "…" {
		return def + s
	}
	return s
}
