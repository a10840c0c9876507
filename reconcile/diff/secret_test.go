package diff

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"testing"
)

func randomValue(t *testing.T) string {
	t.Helper()
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "v-" + hex.EncodeToString(b)
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// secretYAML is a Secret with the given body (data, stringData, metadata
// additions) and recond's Apply entry owning the listed fieldsV1.
func secretYAML(body, owned string) string {
	s := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\n  namespace: shop\n"
	if owned != "" {
		s += "  managedFields:\n  - manager: recond\n    operation: Apply\n    apiVersion: v1\n    fieldsType: FieldsV1\n    fieldsV1: " + owned + "\n"
	}
	return s + "type: Opaque\n" + body
}

var maskRE = regexp.MustCompile(`^<secret sha256:[0-9a-f]{8}>$`)

func TestSecretValuesAreMasked(t *testing.T) {
	v1, v2 := randomValue(t), randomValue(t)
	tests := []struct {
		name          string
		desired, live string
		equivalent    bool // compare with Equivalent (desired is the dry-run result)
		// want lists each difference's path with the plain values its
		// masks stand for ("" for absent).
		want []struct{ path, live, desired string }
	}{
		{
			name:    "data value changed",
			desired: secretYAML("data: {password: "+b64(v2)+"}\n", ""),
			live:    secretYAML("data: {password: "+b64(v1)+"}\n", ""),
			want:    []struct{ path, live, desired string }{{"data.password", v1, v2}},
		},
		{
			name:    "stringData added",
			desired: secretYAML("stringData: {token: "+v1+"}\n", ""),
			live:    secretYAML("", ""),
			want:    []struct{ path, live, desired string }{{"stringData.token", "", v1}},
		},
		{
			name:    "whole data map replacing a value of another shape",
			desired: secretYAML("data: {a: "+b64(v1)+", b: "+b64(v2)+"}\n", ""),
			live:    secretYAML("data: "+v2+"\n", ""),
			want:    []struct{ path, live, desired string }{{"data", v2, "{a,b}"}},
		},
		{
			name:    "owned key removed from git",
			desired: secretYAML("data: {a: "+b64(v1)+"}\n", ""),
			live:    secretYAML("data: {a: "+b64(v1)+", b: "+b64(v2)+"}\n", `{"f:data": {"f:a": {}, "f:b": {}}}`),
			want:    []struct{ path, live, desired string }{{"data.b", v2, ""}},
		},
		{
			name:    "last applied configuration removed",
			desired: secretYAML("data: {a: "+b64(v1)+"}\n", ""),
			live: strings.Replace(secretYAML("data: {a: "+b64(v1)+"}\n", `{"f:metadata": {"f:annotations": {"f:kubectl.kubernetes.io/last-applied-configuration": {}}}}`),
				"  namespace: shop\n", "  namespace: shop\n  annotations: {kubectl.kubernetes.io/last-applied-configuration: '"+lastApplied(v2)+"'}\n", 1),
			want: []struct{ path, live, desired string }{{"metadata.annotations.kubectl.kubernetes.io/last-applied-configuration", lastApplied(v2), ""}},
		},
		{
			name:       "dry run differs in data and stringData",
			equivalent: true,
			desired:    secretYAML("data: {a: "+b64(v2)+", c: "+b64(v1)+"}\n", ""),
			live:       secretYAML("data: {a: "+b64(v1)+"}\nstringData: {b: "+v2+"}\n", ""),
			want: []struct{ path, live, desired string }{
				{"data.a", v1, v2}, {"data.c", "", v1}, {"stringData.b", v2, ""},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			desired, live := desiredObj(t, tt.desired), liveObj(t, tt.live)
			before := desired.DeepCopy()
			var c Change
			if tt.equivalent {
				desired = liveObj(t, tt.desired)
				before = desired.DeepCopy()
				c = Change{Kind: "Secret", Name: "creds", Action: Update, Desired: desired, Live: live,
					Fields: Equivalent(desired, live, recondOpts)}
			} else {
				c = Object(desired, live, recondOpts)
			}
			var got []struct{ path, live, desired string }
			for _, f := range c.Fields {
				got = append(got, struct{ path, live, desired string }{f.Path, unmask(t, f.Path, f.Live, v1, v2), unmask(t, f.Path, f.Desired, v1, v2)})
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("differences mismatch (-want +got):\n- %v\n+ %v", tt.want, got)
			}
			assertNoValue(t, c, v1, v2)
			if !bytes.Equal(mustJSON(t, desired), mustJSON(t, before)) {
				t.Errorf("masking changed the desired object, which is written")
			}
		})
	}
}

// unmask tells which of the values a mask stands for: a mask of v1 or v2
// (decoded from base64 when under data), "{a,b}" for a map of masks by key,
// "" for absent. A value that is not a mask fails the test.
func unmask(t *testing.T, path string, v any, values ...string) string {
	t.Helper()
	switch x := v.(type) {
	case nil:
		return ""
	case map[string]any:
		var keys []string
		for k, m := range x {
			if unmask(t, path+"."+k, m, values...) == "?" {
				return "?"
			}
			keys = append(keys, k)
		}
		return "{" + strings.Join(sorted(keys), ",") + "}"
	case string:
		if !maskRE.MatchString(x) {
			t.Errorf("%s: %q is not a mask", path, x)
			return "?"
		}
		for _, plain := range append(values, lastApplied(values[1])) {
			if x == Mask(testSalt, []byte(plain)) {
				return plain
			}
		}
	}
	t.Errorf("%s: %v masks no known value", path, v)
	return "?"
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// assertNoValue renders c every way a log line, `recond diff` or a JSON
// document could, and fails if any rendering holds a value or its base64.
func assertNoValue(t *testing.T, c Change, values ...string) {
	t.Helper()
	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("difference", "change", c)
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("difference", "change", c, "changes", []Change{c})
	outputs := map[string]string{
		"String":              c.String(),
		"json.Marshal Fields": string(mustJSON(t, c.Fields)),
		"json.Marshal Change": string(mustJSON(t, c)),
		"%v %+v %#v":          fmt.Sprintf("%v %+v %#v %s", c, c, c, []Change{c}),
		"slog":                logged.String(),
	}
	if len(c.Fields) == 0 {
		t.Errorf("no differences to render")
	}
	for how, out := range outputs {
		for _, v := range values {
			for _, form := range []string{v, b64(v), b64(v)[:12]} {
				if strings.Contains(out, form) {
					t.Errorf("%s holds a secret value %q:\n%s", how, form, out)
				}
			}
		}
	}
}

func TestMask(t *testing.T) {
	v1, v2 := randomValue(t), randomValue(t)
	tests := []struct {
		name     string
		a, b     string
		saltA    []byte
		saltB    []byte
		wantSame bool
	}{
		{"same value same mask", v1, v1, testSalt, testSalt, true},
		{"different values different masks", v1, v2, testSalt, testSalt, false},
		{"different salts different masks", v1, v1, testSalt, []byte("other salt"), false},
		{"no salt uses the process salt", v1, v1, nil, nil, true},
		{"the process salt is not empty", v1, v1, nil, []byte{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := Mask(tt.saltA, []byte(tt.a)), Mask(tt.saltB, []byte(tt.b))
			if !maskRE.MatchString(a) || !maskRE.MatchString(b) {
				t.Fatalf("masks %q, %q do not look like <secret sha256:8 hex digits>", a, b)
			}
			if (a == b) != tt.wantSame {
				t.Errorf("Mask(%q) = %s, Mask(%q) = %s; same = %v, want %v", tt.a, a, tt.b, b, a == b, tt.wantSame)
			}
			if strings.Contains(a, tt.a) {
				t.Errorf("mask %s holds the value", a)
			}
		})
	}
	// Unsalted, a mask would be a plain hash anyone can look up.
	sum := sha256.Sum256([]byte(v1))
	if Mask(nil, []byte(v1)) == fmt.Sprintf("<secret sha256:%x>", sum[:4]) {
		t.Errorf("an empty salt hashes the value alone")
	}
}

// lastApplied is the annotation kubectl apply leaves on a Secret holding v
// under data.a.
func lastApplied(v string) string { return `{"data":{"a":"` + b64(v) + `"}}` }

// TestConfigMapValuesAreShown keeps masking to Secrets: a ConfigMap's data
// is shown as it is.
func TestConfigMapValuesAreShown(t *testing.T) {
	desired := desiredObj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: shop}\ndata: {a: new}\n")
	live := liveObj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: shop}\ndata: {a: old}\n")
	got := Object(desired, live, recondOpts).Fields
	want := []FieldDiff{{Path: "data.a", Live: "old", Desired: "new"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Fields mismatch (-want +got):\n%s", fieldsDiff(want, got))
	}
}
