package diff

import (
	"crypto/rand"
	"fmt"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"recond.dev/recond/internal/redact"
)

// A decrypted value that a template copied into a ConfigMap, a
// Deployment's environment or a label is masked in every difference that
// shows it, on both sides (a rotation shows neither the old nor the new
// value), as it is or base64-encoded; a difference without one is shown as
// it is; a field removed from an object that holds one is masked.
func TestSensitiveValuesAreMasked(t *testing.T) {
	v1, v2 := randomValue(t), randomValue(t)
	n1, n2 := randomNumber(t), randomNumber(t)
	cm := func(body string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: shop\n" +
			"  managedFields:\n  - manager: recond\n    operation: Apply\n    apiVersion: v1\n    fieldsType: FieldsV1\n" +
			"    fieldsV1: {f:data: {f:url: {}, f:password: {}, f:old: {}, f:mode: {}}, f:binaryData: {f:blob: {}}}\n" + body
	}
	tests := []struct {
		name          string
		desired, live string
		sensitive     []string
		// masked lists, for each difference by path, whether its values
		// must be masks.
		masked map[string]bool
	}{
		{
			name:      "rotated value copied into a ConfigMap",
			desired:   cm("data: {password: " + v2 + ", mode: fast}\n"),
			live:      cm("data: {password: " + v1 + ", mode: slow}\n"),
			sensitive: []string{v1, v2},
			masked:    map[string]bool{"data.password": true, "data.mode": false},
		},
		{
			name:      "new value inside a longer text; the old one no longer known",
			desired:   cm("data: {url: \"postgres://app:" + v2 + "@db:5432/shop\"}\n"),
			live:      cm("data: {url: \"postgres://app:" + v1 + "@db:5432/shop\"}\n"),
			sensitive: []string{v2},
			masked:    map[string]bool{"data.url": true},
		},
		{
			name:      "base64-encoded into binaryData",
			desired:   cm("binaryData: {blob: " + b64(v2) + "}\n"),
			live:      cm("binaryData: {blob: " + b64(v1) + "}\n"),
			sensitive: []string{v2},
			masked:    map[string]bool{"binaryData.blob": true},
		},
		{
			name:      "field removed from an object that holds a value",
			desired:   cm("data: {password: " + v2 + "}\n"),
			live:      cm("data: {password: " + v2 + ", old: " + v1 + "}\n"),
			sensitive: []string{v2},
			masked:    map[string]bool{"data.old": true},
		},
		{
			name:    "a field that held a value when it was written, the value no longer known",
			desired: cm("data: {url: \"postgres://app@db/shop\", mode: fast}\n"),
			live: strings.Replace(cm("data: {url: \"postgres://app:"+v1+"@db/shop\", mode: slow}\n"),
				"  namespace: shop\n", "  namespace: shop\n  annotations: {"+MaskedFieldsAnnotation+": '[\"binaryData.blob\",\"data.url\"]'}\n", 1),
			masked: map[string]bool{"data.url": true, "data.mode": false},
		},
		{
			name:      "a value as a map key",
			desired:   cm("data: {" + v2 + ": x, mode: fast}\n"),
			live:      cm("data: {mode: fast}\n"),
			sensitive: []string{v2},
			masked:    map[string]bool{"data.<key>": true},
		},
		{
			name:      "a multi-line value indented into a config file",
			desired:   cm("data: {conf: \"key: |\\n    -----BEGIN KEY-----\\n    " + v2 + "line1\\n    -----END KEY-----\\n\"}\n"),
			live:      cm("data: {conf: old}\n"),
			sensitive: []string{"-----BEGIN KEY-----\n" + v2 + "line1\n-----END KEY-----"},
			masked:    map[string]bool{"data.conf": true},
		},
		{
			name:      "a value as toJson writes it",
			desired:   cm("data: {conf: '{\"pw\":\"" + v2 + "\\u0026\\u003c\"}'}\n"),
			live:      cm("data: {conf: old}\n"),
			sensitive: []string{v2 + "&<"},
			masked:    map[string]bool{"data.conf": true},
		},
		{
			name:      "no value: shown as it is",
			desired:   cm("data: {mode: fast}\n"),
			live:      cm("data: {mode: slow}\n"),
			sensitive: []string{v1},
			masked:    map[string]bool{"data.mode": false},
		},
		{
			// Helm reads a values file's number as a float64 and prints
			// it so: the decrypted "12345679" is "1.2345679e+07" in the
			// ConfigMap, on both sides of a rotation.
			name:      "an encrypted integer Helm printed as a float",
			desired:   cm("data: {pin: \"" + float(t, n2) + "\", mode: fast}\n"),
			live:      cm("data: {pin: \"" + float(t, n1) + "\", mode: slow}\n"),
			sensitive: []string{n1, n2},
			masked:    map[string]bool{"data.pin": true, "data.mode": false},
		},
		{
			// The annotation names the map whose keys held a value: a
			// process that never decrypted the old value (recond diff in
			// CI, a restart) shows neither key.
			name:      "a rotated value used as a key, the old one no longer known",
			desired:   withMasked(cm("data: {"+v2+": x, mode: fast}\n"), "data"),
			live:      withMasked(strings.Replace(cm("data: {"+v1+": x, mode: fast}\n"), "f:old: {}", "f:old: {}, f:"+v1+": {}", 1), "data"),
			sensitive: []string{v2},
			masked:    map[string]bool{"data.<key>": true},
		},
		{
			name:      "a map whose keys held a value, replaced whole",
			desired:   cm("data: [" + v2 + "]\n"),
			live:      withMasked(cm("data: {"+v1+": x}\n"), "data"),
			masked:    map[string]bool{"data": true},
			sensitive: []string{v2},
		},
		{
			name: "environment variable of a Deployment",
			desired: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  template:\n    spec:\n      containers:\n" +
				"      - name: web\n        image: web:2\n        env:\n        - {name: TOKEN, value: " + v2 + "}\n",
			live: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  template:\n    spec:\n      containers:\n" +
				"      - name: web\n        image: web:1\n        env:\n        - {name: TOKEN, value: " + v1 + "}\n",
			sensitive: []string{v2},
			masked: map[string]bool{
				"spec.template.spec.containers[name=web].env[name=TOKEN].value": true,
				"spec.template.spec.containers[name=web].image":                 false,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := Options{Manager: "recond", Sensitive: redact.New(tt.sensitive)}
			c := Object(desiredObj(t, tt.desired), liveObj(t, tt.live), opts)
			got := map[string]bool{}
			for _, f := range c.Fields {
				live, desired := isMask(f.Live), isMask(f.Desired)
				if f.Live != nil && f.Desired != nil && live != desired {
					t.Errorf("%s: one side masked, not the other: %v -> %v", f.Path, f.Live, f.Desired)
				}
				p := f.Path
				if maskInPath.MatchString(p) {
					p = maskInPath.ReplaceAllString(p, "<key>")
				}
				got[p] = live || desired
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.masked) {
				t.Errorf("masked differences:\n got %v\nwant %v", got, tt.masked)
			}
			assertNoValue(t, c, v1, v2, n1, n2, float(t, n1), float(t, n2))
			for _, f := range c.Fields {
				for _, v := range []string{v1, v2} {
					if strings.Contains(f.Path, v) {
						t.Errorf("the path %q names a value", f.Path)
					}
				}
			}
		})
	}
}

var maskInPath = regexp.MustCompile(`<secret sha256:[0-9a-f]{8}>`)

func isMask(v any) bool {
	if m, ok := v.(map[string]any); ok {
		// A map is masked when its keys and its values are.
		for k, c := range m {
			if !isMask(k) || !isMask(c) {
				return false
			}
		}
		return len(m) > 0
	}
	s, ok := v.(string)
	return ok && maskRE.MatchString(s)
}

// Fields names the fields that hold a value, cut at the first list, and
// looks in metadata only at labels and annotations.
func TestSensitiveFields(t *testing.T) {
	v := randomValue(t)
	obj := desiredObj(t, "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: "+v+"\n  annotations: {note: \"key "+v+"\"}\n"+
		"spec:\n  replicas: 2\n  template:\n    spec:\n      containers:\n      - name: web\n        env:\n        - {name: A, value: "+v+"}\n"+
		"data: {url: \"x"+v+"x\", plain: y}\n")
	got := Fields(redact.New([]string{v}), obj.Object)
	want := []string{"data.url", "metadata.annotations.note", "spec.template.spec.containers"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Fields = %v, want %v", got, want)
	}
	if got := Fields(redact.New([]string{"absent-value"}), obj.Object); got != nil {
		t.Errorf("Fields without a value = %v, want nil", got)
	}
}

// A key that holds a value is masked and never named in
// MaskedFieldsAnnotation's fields; a number Helm printed as a float is
// named like the decrypted integer.
func TestFieldsNameNoKey(t *testing.T) {
	v := randomValue(t)
	obj := desiredObj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {"+v+"-user: x, mode: fast}\n")
	fields := Fields(redact.New([]string{v}), obj.Object)
	if fmt.Sprint(fields) != "[data]" {
		t.Errorf("Fields = %v, want [data]: a key that holds a value is not named", fields)
	}
	if strings.Contains(MaskedFields(fields), v) {
		t.Errorf("the annotation names the value: %s", MaskedFields(fields))
	}
	n := randomNumber(t)
	obj = desiredObj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {pin: \""+float(t, n)+"\", mode: fast}\n")
	if got := Fields(redact.New([]string{n}), obj.Object); fmt.Sprint(got) != "[data.pin]" {
		t.Errorf("Fields = %v, want [data.pin]: the float Helm printed holds the value", got)
	}
}

// randomNumber is an 8-digit integer no message holds by chance.
func randomNumber(t *testing.T) string {
	t.Helper()
	n, err := rand.Int(rand.Reader, big.NewInt(80_000_000))
	if err != nil {
		t.Fatal(err)
	}
	return strconv.FormatInt(n.Int64()+10_000_001, 10)
}

// float is n as Helm prints a number it read from a values file.
func float(t *testing.T, n string) string {
	t.Helper()
	f, err := strconv.ParseFloat(n, 64)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(f)
}

// withMasked is an object's YAML with MaskedFieldsAnnotation naming fields.
func withMasked(doc string, fields ...string) string {
	return strings.Replace(doc, "  namespace: shop\n", "  namespace: shop\n  annotations: {"+MaskedFieldsAnnotation+": '"+MaskedFields(fields)+"'}\n", 1)
}
