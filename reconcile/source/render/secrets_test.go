package render

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"

	"recond.dev/recond/internal/redact/redacttest"
)

// A document that is secret as a whole (what a decrypted SOPS file will
// be) is marked before it is inspected: its numbers are reported without
// their digits, and any error of the render loses its values.
func TestMarkedDocumentIsSecretMaterial(t *testing.T) {
	v := redacttest.Value(t)
	digits := redacttest.Digits(t)
	doc := "apiVersion: example.com/v1\nkind: Conf\nmetadata:\n  name: c\nspec:\n  token: " + v + "\n  pin: " + digits + "\n"
	b := NewBudget(DefaultLimits)
	b.secrets.MarkFile("conf.yaml")
	err := b.Inspect("conf.yaml", []byte(doc), true)
	if err == nil || !strings.Contains(err.Error(), "spec.pin: number") {
		t.Fatalf("inspect error = %v, want spec.pin's number refused", err)
	}
	if strings.Contains(redacttest.Renderings(err), digits) {
		t.Errorf("error quotes the number of a secret document: %v", err)
	}
	// What another check would have said, quoting the document.
	leaky := &ManifestError{File: "conf.yaml", Object: "Conf/c", Err: fmt.Errorf("spec.token: %q is not valid", v)}
	safe := b.Safe(leaky)
	if strings.Contains(redacttest.Renderings(safe), v) {
		t.Errorf("safe(%v) = %v, still quoting the value", leaky, safe)
	}
	var me *ManifestError
	if !errors.As(safe, &me) || me.File != "conf.yaml" || me.Object != "Conf/c" {
		t.Errorf("safe(...) = %#v, want the *ManifestError kept", safe)
	}
	// Unmarked, the same document is not secret material.
	plain := NewBudget(DefaultLimits)
	err = plain.Inspect("conf.yaml", []byte(doc), true)
	if err == nil || !strings.Contains(err.Error(), digits) {
		t.Errorf("unmarked: error = %v, want the number quoted", err)
	}
}

func TestRedact(t *testing.T) {
	var m Secrets
	for _, v := range []string{"Hunter2", "ab", "line one\nline two", "quo\"te"} {
		m.AddText(v)
	}
	limit := &LimitError{Limit: LimitBytes, Value: 2, Max: 1}
	tests := []struct {
		err  error
		want string
	}{
		{errors.New("invalid literal source password:Hunter2, expected key=value"), "invalid literal source password:<redacted>, expected key=value"},
		// A short value only as a whole token.
		{errors.New("ab, abc, (ab) cab"), "<redacted>, abc, (<redacted>) cab"},
		{errors.New(`near "line two" and "quo\"te"`), `near "<redacted>" and "<redacted>"`},
		{errors.New("nothing secret"), "nothing secret"},
		{&ManifestError{File: "f.yaml", Object: "Secret/Hunter2", Err: fmt.Errorf("x Hunter2: %w", limit)}, "f.yaml: Secret/<redacted>: x <redacted>: bytes limit exceeded: 2 > 1 (raise  if this is intended)"},
		{context.Canceled, "context canceled"},
		{nil, ""},
	}
	for _, tt := range tests {
		got := m.redact(tt.err)
		if got == nil {
			if tt.err != nil {
				t.Errorf("redact(%v) = nil", tt.err)
			}
			continue
		}
		if got.Error() != tt.want {
			t.Errorf("redact(%q) = %q, want %q", tt.err, got, tt.want)
		}
		want := tt.err
		if me, ok := tt.err.(*ManifestError); ok {
			// Rebuilt, so that no *ManifestError in the chain has the old text.
			want = me.Err
		}
		if !errors.Is(got, want) {
			t.Errorf("redact(%v) does not wrap the original", tt.err)
		}
	}
	var le *LimitError
	if !errors.As(m.redact(tests[4].err), &le) {
		t.Error("redact lost the *LimitError")
	}
	// An error made safe by construction is left as it is.
	se := SecretErrorf("key %s", "Hunter2")
	if got := m.redact(se); got != se {
		t.Errorf("redact(secretError) = %v", got)
	}
}

// Every Secret value of the render is material, whatever file it came
// from: plain, in a List, in data (decoded too), in a patch of a Secret.
func TestSecretMaterialGathered(t *testing.T) {
	var m Secrets
	add := func(file, text string) {
		dec := yaml.NewDecoder(strings.NewReader(text))
		for {
			var n yaml.Node
			if dec.Decode(&n) != nil {
				return
			}
			m.addDocument(file, &n)
		}
	}
	add("s.yaml", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: a\nstringData:\n  k: plain-value\ndata:\n  d: "+base64.StdEncoding.EncodeToString([]byte("decoded-value"))+"\n")
	add("l.yaml", "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Secret, metadata: {name: b}, stringData: {k: listed-value}}\n")
	add("cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  k: not-secret\n")
	m.MarkPatch("p.yaml")
	add("p.yaml", "- op: replace\n  path: /stringData/k\n  value: patched-value\n")
	m.AddInlinePatch("stringData:\n  k: inline-value\n")
	for _, v := range []string{"plain-value", "decoded-value", "listed-value", "patched-value", "inline-value"} {
		if _, ok := m.values[v]; !ok {
			t.Errorf("%q is not secret material", v)
		}
	}
	for _, v := range []string{"not-secret", "Secret", "replace", "/stringData/k", "v1"} {
		if _, ok := m.values[v]; ok {
			t.Errorf("%q is secret material, and would be removed from every error", v)
		}
	}
}

// The number check itself never quotes a Secret's value (whatever redact
// does afterwards): data, stringData and annotations of a Secret.
func TestNumberErrorHidesSecretValues(t *testing.T) {
	digits := redacttest.Digits(t)
	for _, doc := range []string{
		"apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  pin: " + digits + "\n",
		"apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ndata:\n  pin: " + digits + "\n",
		"apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n  annotations:\n    a: " + digits + "\n",
		`{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"}, "stringData": {"pin": ` + digits + `}}`,
	} {
		b := NewBudget(DefaultLimits)
		err := b.Inspect("s.yaml", []byte(doc), true)
		if err == nil || !strings.Contains(err.Error(), "Secret/db") || !strings.Contains(err.Error(), "not shown") {
			t.Errorf("inspect(%q) = %v, want the number refused without its digits", doc, err)
			continue
		}
		if strings.Contains(redacttest.Renderings(err), digits) {
			t.Errorf("inspect(%q) = %v, quoting the value", doc, err)
		}
	}
}

// A decrypted value (a chart's encrypted values file) that starts with a
// YAML indicator, copied by a template into a ConfigMap: the document
// holds a value the render knows, and its parser error says where only.
func TestParseErrorAboutADecryptedValue(t *testing.T) {
	core := "Xk9" + redacttest.Value(t)
	for _, value := range []string{"*" + core, "!!int " + core, "!!float " + core} {
		b := NewBudget(DefaultLimits)
		b.secrets.AddGenerated(value) // as Decrypt adds a values file's
		doc := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  token: " + value + "\n"
		_, err := b.Decode("app/templates/cm.yaml", []byte(doc))
		if err == nil {
			t.Fatalf("%s: decode succeeded", value)
		}
		err = b.Safe(err)
		if text := redacttest.Renderings(err); strings.Contains(text, core) {
			t.Errorf("%s: error quotes the value:\n%s", value, text)
		}
		if !strings.Contains(err.Error(), "app/templates/cm.yaml: document 1, line 6") {
			t.Errorf("%s: error %q does not say where", value, err)
		}
	}
}
