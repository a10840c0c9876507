package diff

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// A decrypted value that a template copied into a ConfigMap, a
// Deployment's environment or a label is masked in every difference that
// shows it, on both sides (a rotation shows neither the old nor the new
// value), as it is or base64-encoded; a difference without one is shown as
// it is; a field removed from an object that holds one is masked.
func TestSensitiveValuesAreMasked(t *testing.T) {
	v1, v2 := randomValue(t), randomValue(t)
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
			opts := Options{Manager: "recond", Sensitive: NewSensitive(tt.sensitive)}
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
			assertNoValue(t, c, v1, v2)
		})
	}
}

var maskInPath = regexp.MustCompile(`<secret sha256:[0-9a-f]{8}>`)

func isMask(v any) bool {
	s, ok := v.(string)
	return ok && maskRE.MatchString(s)
}

func TestSensitiveIn(t *testing.T) {
	s := NewSensitive([]string{"hunter2-long", "42", "true", " "})
	tests := []struct {
		v    any
		want bool
	}{
		{"x hunter2-long y", true},
		{b64("hunter2-long"), true},
		{"42", true},
		{int64(42), true},
		{"1425", false}, // a short value only as a whole field
		{true, false},   // booleans are never sensitive
		{"true", false},
		{map[string]any{"a": []any{"b", map[string]any{"c": "hunter2-long"}}}, true},
		{map[string]any{"hunter2-long": "key"}, true},
		{map[string]any{"a": []any{"b", int64(7)}}, false},
		{nil, false},
	}
	for _, tt := range tests {
		if got := s.In(tt.v); got != tt.want {
			t.Errorf("In(%#v) = %v, want %v", tt.v, got, tt.want)
		}
	}
	var none *Sensitive
	if none.In("hunter2-long") || NewSensitive(nil, []string{"", "false"}) != nil {
		t.Error("an empty matcher finds something")
	}
}

// Fields names the fields that hold a value, cut at the first list, and
// looks in metadata only at labels and annotations.
func TestSensitiveFields(t *testing.T) {
	v := randomValue(t)
	obj := desiredObj(t, "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: "+v+"\n  annotations: {note: \"key "+v+"\"}\n"+
		"spec:\n  replicas: 2\n  template:\n    spec:\n      containers:\n      - name: web\n        env:\n        - {name: A, value: "+v+"}\n"+
		"data: {url: \"x"+v+"x\", plain: y}\n")
	got := NewSensitive([]string{v}).Fields(obj.Object)
	want := []string{"data.url", "metadata.annotations.note", "spec.template.spec.containers"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Fields = %v, want %v", got, want)
	}
	if got := NewSensitive([]string{"absent-value"}).Fields(obj.Object); got != nil {
		t.Errorf("Fields without a value = %v, want nil", got)
	}
}

// A multi-line value is found whole (whatever the indentation) and by its
// key-material lines, never by an armor line, a word or a line of JSON
// that other texts hold too; a key that holds a value is masked and never
// named in MaskedFieldsAnnotation's fields.
func TestSensitiveMultiLineAndKeys(t *testing.T) {
	body := randomValue(t) + "QUJDREVGR0hJSktM"
	pem := "-----BEGIN CERTIFICATE-----\n" + body + "\n-----END CERTIFICATE-----"
	json := "{\n  \"enabled\": true,\n  \"key\": \"" + randomValue(t) + "\"\n}"
	s := NewSensitive([]string{pem, json})
	for _, tt := range []struct {
		text string
		want bool
	}{
		{"ca.crt: |\n    -----BEGIN CERTIFICATE-----\n    " + body + "\n    -----END CERTIFICATE-----\n", true},
		{"x" + body + "x", true},
		{"-----BEGIN CERTIFICATE-----\nMIIBpublicCA\n-----END CERTIFICATE-----", false},
		{"{\n  \"enabled\": true,\n  \"other\": 1\n}", false},
	} {
		if got := s.In(tt.text); got != tt.want {
			t.Errorf("In(%q) = %v, want %v", tt.text, got, tt.want)
		}
	}
	v := randomValue(t)
	obj := desiredObj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {"+v+"-user: x, mode: fast}\n")
	fields := NewSensitive([]string{v}).Fields(obj.Object)
	if fmt.Sprint(fields) != "[data]" {
		t.Errorf("Fields = %v, want [data]: a key that holds a value is not named", fields)
	}
	if strings.Contains(MaskedFields(fields), v) {
		t.Errorf("the annotation names the value: %s", MaskedFields(fields))
	}
}
