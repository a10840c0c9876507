package generated

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func secret(data, stringData map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "tls"}}}
	if data != nil {
		u.Object["data"] = data
	}
	if stringData != nil {
		u.Object["stringData"] = stringData
	}
	return u
}

func key(u *unstructured.Unstructured) string { return u.GetKind() + "/" + u.GetName() }

// A generated field keeps its live value (a Secret's stringData read back
// from data); the render's object is not changed; an object without live
// copy, or made whole, is left as rendered.
func TestKeepHoldsLiveValues(t *testing.T) {
	desired := secret(nil, map[string]any{"key": "new", "other": "x"})
	live := secret(map[string]any{"key": "b2xk"}, nil) // "old"
	gen := map[string][][]string{"Secret/tls": {{"stringData", "key"}}}
	out := Keep([]*unstructured.Unstructured{desired}, gen, map[string]*unstructured.Unstructured{"Secret/tls": live}, key)
	if got, _, _ := unstructured.NestedString(out[0].Object, "stringData", "key"); got != "old" {
		t.Errorf("stringData.key = %q, want the live value old", got)
	}
	if got, _, _ := unstructured.NestedString(desired.Object, "stringData", "key"); got != "new" {
		t.Errorf("the render's object was changed: %q", got)
	}
	if out := Keep([]*unstructured.Unstructured{desired}, gen, nil, key); out[0] != desired {
		t.Error("an object not yet created was copied")
	}
	whole := map[string][][]string{"Secret/tls": {{}}}
	if !Whole(whole["Secret/tls"]) {
		t.Error("Whole of the empty path is false")
	}
	if out := Keep([]*unstructured.Unstructured{desired}, whole, map[string]*unstructured.Unstructured{"Secret/tls": live}, key); out[0] != desired {
		t.Error("an object made whole was copied")
	}
}
