package optout

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func obj(kind, name string, ann map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": kind,
		"spec": map[string]any{"replicas": int64(2), "ports": []any{map[string]any{"port": int64(80)}}},
	}}
	u.SetName(name)
	u.SetAnnotations(ann)
	return u
}

func key(u *unstructured.Unstructured) string { return u.GetKind() + "/" + u.GetName() }

// TestCheck: a value an opt-out does not know is an error naming the
// annotation, and ignore-fields removes what it names, refusing the
// object's identity, recond's own keys and paths through lists.
func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		ann     map[string]string
		fields  string // the pointers returned, comma-joined
		wantErr string
	}{
		{nil, "", ""},
		{map[string]string{"recond.dev/reconcile": "disabled", "recond.dev/apply": "create-only", "recond.dev/prune": "disabled", "recond.dev/force": "recreate"}, "", ""},
		{map[string]string{"recond.dev/reconcile": ""}, "", ""},
		{map[string]string{"recond.dev/reconcile": "off"}, "", `annotation recond.dev/reconcile: "off" is not a value recond knows (want "disabled")`},
		{map[string]string{"recond.dev/apply": "createonly"}, "", `want "create-only"`},
		{map[string]string{"recond.dev/ignore-fields": " /spec/replicas, ,/data/x"}, "/spec/replicas,/data/x", ""},
		{map[string]string{"recond.dev/ignore-fields": "spec/replicas"}, "", "a JSON pointer starts with /"},
		{map[string]string{"recond.dev/ignore-fields": "/spec//x"}, "", "empty path segment"},
		{map[string]string{"recond.dev/ignore-fields": "/spec/a~b"}, "", "~ is written ~0"},
		{map[string]string{"recond.dev/ignore-fields": "/kind"}, "", "the object's type"},
		{map[string]string{"recond.dev/ignore-fields": "/metadata/labels"}, "", "as a whole"},
		{map[string]string{"recond.dev/ignore-fields": "/metadata/labels/recond.dev~1instance"}, "", "recond's own labels"},
		{map[string]string{"recond.dev/ignore-fields": "/metadata/labels/app.kubernetes.io~1managed-by"}, "", "recond's own labels"},
		{map[string]string{"recond.dev/ignore-fields": "/spec/ports/0/port"}, "", "/spec/ports is a list"},
	} {
		u := obj("Deployment", "web", tc.ann)
		got, err := Check(u)
		switch {
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%v: error %v, want one saying %q", tc.ann, err, tc.wantErr)
		case tc.wantErr == "" && err != nil:
			t.Errorf("%v: %v", tc.ann, err)
		case strings.Join(got, ",") != tc.fields:
			t.Errorf("%v: ignored %q, want %q", tc.ann, got, tc.fields)
		}
	}
	u := obj("Deployment", "web", map[string]string{"recond.dev/ignore-fields": "/spec/replicas"})
	if _, err := Check(u); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "replicas"); found {
		t.Error("/spec/replicas still there")
	}
}

// TestSelect: reconcile: disabled on either side takes the object out of
// both; ignored fields are listed; a live opt-out misspelt is said.
func TestSelect(t *testing.T) {
	off := map[string]string{"recond.dev/reconcile": "disabled"}
	desired := []*unstructured.Unstructured{obj("ConfigMap", "a", nil), obj("ConfigMap", "b", off), obj("ConfigMap", "c", nil), obj("ConfigMap", "d", nil)}
	live := []*unstructured.Unstructured{obj("ConfigMap", "a", off), obj("ConfigMap", "c", map[string]string{"recond.dev/prune": "no"})}
	s := Select(desired, live, map[string][]string{"ConfigMap/d": {"/data/x"}}, key)
	var got []string
	for _, sk := range s.Skipped {
		got = append(got, sk.String())
	}
	if want := "ConfigMap/a (reconcile_disabled) ConfigMap/b (reconcile_disabled) ConfigMap/d (ignore_fields: /data/x)"; strings.Join(got, " ") != want {
		t.Errorf("skipped %q, want %q", got, want)
	}
	if want := `ConfigMap/c: recond.dev/prune: "no" (want "disabled")`; len(s.Misspelt) != 1 || s.Misspelt[0] != want {
		t.Errorf("misspelt %q, want %q", s.Misspelt, want)
	}
	var kept []string
	for _, u := range s.Keep(desired) {
		kept = append(kept, u.GetName())
	}
	if strings.Join(kept, "") != "cd" {
		t.Errorf("kept %v, want c and d", kept)
	}
	if none := Select(desired[2:], live[1:], nil, key); len(none.Skipped) != 0 || &none.Keep(desired)[0] != &desired[0] {
		t.Error("without an opt-out the objects are kept as they are")
	}
}
