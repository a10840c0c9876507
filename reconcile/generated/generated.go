package generated

import (
	"encoding/base64"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"recond.dev/recond/reconcile/source"
)

// Keep returns desired with, for each object whose fields a chart's key
// or certificate maker made (generated, by key: the paths of those fields)
// and that exists (live, by key), a copy whose generated fields hold the
// live values: such a field is written when the object is created, and
// never rewritten because a render made another key. The render's objects
// are not changed.
func Keep(desired []*unstructured.Unstructured, generated map[string][][]string, live map[string]*unstructured.Unstructured, key func(*unstructured.Unstructured) string) []*unstructured.Unstructured {
	if len(generated) == 0 {
		return desired
	}
	out := desired
	for i, d := range desired {
		k := key(d)
		paths, l := generated[k], live[k]
		if len(paths) == 0 || l == nil || Whole(paths) {
			continue
		}
		if &out[0] == &desired[0] {
			out = slices.Clone(desired)
		}
		c := d.DeepCopy()
		for _, p := range paths {
			if source.GeneratedInputsChanged(d.GetAnnotations(), l.GetAnnotations(), p) {
				continue
			}
			v, found, _ := unstructured.NestedFieldNoCopy(l.Object, p...)
			if !found && len(p) == 2 && p[0] == "stringData" {
				// The server keeps a Secret's stringData under data.
				if enc, ok, _ := unstructured.NestedString(l.Object, "data", p[1]); ok {
					if dec, err := base64.StdEncoding.DecodeString(enc); err == nil {
						v, found = string(dec), true
					}
				}
			}
			if found {
				_ = unstructured.SetNestedField(c.Object, runtime.DeepCopyJSONValue(v), p...)
			}
		}
		out[i] = c
	}
	return out
}

// Whole reports whether paths stand for the whole object.
func Whole(paths [][]string) bool {
	return len(paths) == 1 && len(paths[0]) == 0
}
