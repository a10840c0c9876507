package diff

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"
)

// The seed corpora live in testdata/fuzz/<target>/; the desired and live
// fixtures of testdata/ are added here as well.

// fixturePairs are the desired and live fixtures of testdata/, as JSON.
func fixturePairs(f *testing.F) [][2][]byte {
	f.Helper()
	var out [][2][]byte
	for _, kind := range []string{"deployment", "service", "secret"} {
		var pair [2][]byte
		for i, name := range []string{kind + ".yaml", kind + "-live.yaml"} {
			b, err := os.ReadFile(filepath.Join("testdata", name))
			if err != nil {
				f.Fatal(err)
			}
			if pair[i], err = yaml.YAMLToJSON(b); err != nil {
				f.Fatalf("%s: %v", name, err)
			}
		}
		out = append(out, pair)
	}
	return out
}

// FuzzObject compares any two JSON objects, the desired one decoded as a
// manifest (numbers as float64) and the live one as client-go does (integers
// as int64); with secret set, both are made Secrets. The comparison never
// panics, never modifies either object, is deterministic, finds nothing
// between an object and a copy of itself, and never shows a Secret's value
// in any rendering of the change.
func FuzzObject(f *testing.F) {
	for _, p := range fixturePairs(f) {
		f.Add(p[0], p[1], false)
	}
	f.Add([]byte(`{"data":{"a":"c2VjcmV0LXZhbHVl"}}`), []byte(`{"data":{"a":"b3RoZXItdmFsdWU="}}`), true)
	f.Add([]byte(`{"stringData":{"token":"hunter2hunter2"}}`), []byte(`{"data":{"token":"aHVudGVyMmh1bnRlcjI="}}`), true)
	f.Add([]byte(`{"data":{"a":"eA=="}}`), []byte(`{"data":"not-a-map-value","metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"data\":{\"a\":\"eA==\"}}"}}}`), true)
	f.Add([]byte(`{"spec":{"ports":[{"port":80},{"port":80,"protocol":"UDP"}]}}`), []byte(`{"spec":{"ports":[{"port":80,"protocol":"TCP","targetPort":8080}]}}`), false)
	f.Add([]byte(`{"spec":{"x":[{"name":1},{"name":1.0}]}}`), []byte(`{"spec":{"x":[{"name":"1"}]}}`), false)
	opts := recondOpts
	f.Fuzz(func(t *testing.T, desiredJSON, liveJSON []byte, secret bool) {
		var dm, lm map[string]any
		if json.Unmarshal(desiredJSON, &dm) != nil || utiljson.Unmarshal(liveJSON, &lm) != nil || dm == nil || lm == nil {
			return
		}
		if secret {
			for _, m := range []map[string]any{dm, lm} {
				m["apiVersion"], m["kind"] = "v1", "Secret"
			}
		}
		desired, live := &unstructured.Unstructured{Object: dm}, &unstructured.Unstructured{Object: lm}
		dBefore, lBefore := desired.DeepCopy(), live.DeepCopy()

		c := Object(desired, live, opts)
		eq := Equivalent(desired, live, opts)
		if !reflect.DeepEqual(desired, dBefore) || !reflect.DeepEqual(live, lBefore) {
			t.Fatalf("the comparison modified its objects")
		}
		if again := Object(desired, live, opts); again.String() != c.String() || again.Uncertain != c.Uncertain {
			t.Fatalf("Object is not deterministic:\n%s\nthen\n%s", c, again)
		}
		for _, u := range []*unstructured.Unstructured{desired, live} {
			if self := Object(u, u.DeepCopy(), opts); self.Action != Unchanged || len(self.Fields) > 0 {
				t.Fatalf("an object differs from its copy: %s", self)
			}
			if self := Equivalent(u, u.DeepCopy(), opts); len(self) > 0 {
				t.Fatalf("Equivalent: an object differs from its copy: %v", self)
			}
		}
		if c.Action != Unchanged && c.Action != Update || (c.Action == Update) != (len(c.Fields) > 0) {
			t.Fatalf("action %q with %d differences", c.Action, len(c.Fields))
		}
		if isSecret(desired.GroupVersionKind()) || isSecret(live.GroupVersionKind()) {
			checkNoSecret(t, c, eq, desired, live)
		}
	})
}

var anyMaskRE = regexp.MustCompile(`<secret sha256:[0-9a-f]{8}>`)

// checkNoSecret fails when a value of a secret field of desired or live
// shows in a rendering of c or eq, unless it also appears where it is not
// secret (a key, a path, another field, the vocabulary of the rendering).
func checkNoSecret(t *testing.T, c Change, eq []FieldDiff, desired, live *unstructured.Unstructured) {
	t.Helper()
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("difference", "change", c)
	fields, err := json.Marshal(eq)
	if err != nil {
		t.Fatal(err)
	}
	change, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	shown := anyMaskRE.ReplaceAllString(fmt.Sprintf("%s\n%#v\n%s\n%s\n%s\n%v", c, c, change, fields, logged.String(), eq), "")

	// What is not secret: the objects without their secret values, every
	// path, and the words of the renderings.
	public := []string{`update (uncertain) create delete unchanged <none> -> "kind":"name":"action":"uncertain":true,"fields":"path":"live":"desired":null`,
		`diff.Change{Kind:, Name:, Action:, Uncertain:false, Fields:[]diff.FieldDiff{diff.FieldDiff{Path:, Live:, Desired:}}} map[string]interface {}{} level=INFO msg=difference time= {"time":"level":"INFO","msg":"difference","change":"}`}
	var secrets []string
	for _, u := range []*unstructured.Unstructured{desired, live} {
		pub := u.DeepCopy()
		for _, field := range []string{"data", "stringData"} {
			secrets = append(secrets, leaves(u.Object[field], field == "data")...)
			pub.Object[field] = keysOnly(u.Object[field])
		}
		if a, ok := u.GetAnnotations()[lastAppliedKey]; ok {
			secrets = append(secrets, a)
			unstructured.RemoveNestedField(pub.Object, "metadata", "annotations", lastAppliedKey)
		}
		b, _ := json.Marshal(pub.Object)
		public = append(public, string(b), fmt.Sprint(pub.Object))
	}
	for _, f := range append(c.Fields, eq...) {
		public = append(public, f.Path)
	}
	all := strings.Join(public, "\n")
	for _, s := range secrets {
		if len(s) >= 4 && strings.Contains(shown, s) && !strings.Contains(all, s) {
			t.Fatalf("secret value %q shows in:\n%s", s, shown)
		}
	}
}

const lastAppliedKey = "kubectl.kubernetes.io/last-applied-configuration"

// leaves returns every scalar under v as text, and for data also the
// base64-decoded strings.
func leaves(v any, data bool) []string {
	switch x := v.(type) {
	case nil:
		return nil
	case map[string]any:
		var out []string
		for _, c := range x {
			out = append(out, leaves(c, data)...)
		}
		return out
	case []any:
		var out []string
		for _, c := range x {
			out = append(out, leaves(c, data)...)
		}
		return out
	case string:
		out := []string{x}
		if b, err := base64.StdEncoding.DecodeString(x); data && err == nil {
			out = append(out, string(b))
		}
		return out
	}
	return []string{fmt.Sprint(v)}
}

// keysOnly keeps the map keys of v, dropping every value.
func keysOnly(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, c := range m {
		out[k] = keysOnly(c)
	}
	return out
}
