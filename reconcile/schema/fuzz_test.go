package schema

import (
	"reflect"
	"strings"
	"testing"

	"recond.dev/recond/reconcile/diff"
)

// The seed corpora live in testdata/fuzz/<target>/; the documents of
// testdata/ are added here as well, with paths TestTypeOfDocuments types.

// FuzzParse reads any OpenAPI v3 document and types any path (slash-joined,
// [] for a list item) in each kind it describes: parsing never panics and is
// deterministic, and typing always ends, with one of the field types, the
// same each time.
func FuzzParse(f *testing.F) {
	for _, fx := range []struct{ file, path string }{
		{"autoscaling-v2.json", "spec/metrics/[]/external/target/averageValue"},
		{"core-v1.json", "spec/ports/[]/targetPort"},
		{"example.com-v1.json", "spec/timeout"},
		{"gadget-v1.json", "spec/loop/x"},
	} {
		f.Add(readFixture(f, fx.file), fx.path)
	}
	f.Add([]byte(`{"components": {"schemas": {"a": {"items": {"properties": 3}}}}}`), "")
	f.Add([]byte(`{"components": {"schemas": {"a": {"$ref": "#/components/schemas/b"}, "b": {"$ref": "#/components/schemas/a",
		"x-kubernetes-group-version-kind": [{"group": "", "version": "v1", "kind": "A"}]}}}}`), "spec/[]/x")
	f.Add([]byte(`{"components": {"schemas": {"k": {"x-kubernetes-group-version-kind": [{"version": "v1", "kind": "K"}],
		"properties": {"q": {"x-kubernetes-int-or-string": true, "pattern": "`+strings.ReplaceAll(QuantityPattern, `\`, `\\`)+`"},
		"m": {"additionalProperties": {"format": "int-or-string"}}, "l": {"items": {"allOf": [{"format": "duration"}]}}}}}}}`), "m/any")
	f.Add([]byte(`{"components": {"schemas": null}}`), "a")
	f.Add([]byte(`[]`), "")
	valid := map[diff.FieldType]bool{diff.FieldUnknown: true, diff.FieldPlain: true, diff.FieldQuantity: true,
		diff.FieldIntOrString: true, diff.FieldDuration: true}
	f.Fuzz(func(t *testing.T, doc []byte, path string) {
		d, err := parse(doc)
		again, err2 := parse(doc)
		if (err == nil) != (err2 == nil) || !reflect.DeepEqual(d, again) {
			t.Fatalf("parse is not deterministic: %v, then %v", err, err2)
		}
		if err != nil {
			if d != nil {
				t.Fatalf("error %v with a document", err)
			}
			return
		}
		elems := strings.Split(path, "/")
		compacted := compact(d)
		for gvk, root := range d.kinds {
			typ := d.typeOf(root, elems)
			if !valid[typ] {
				t.Fatalf("%s %s: type %d is none of the field types", gvk, path, typ)
			}
			if again := again.typeOf(again.kinds[gvk], elems); again != typ {
				t.Fatalf("%s %s: typed %s, then %s", gvk, path, typ, again)
			}
			if c := compacted[gvk].typeOf(elems); c != typ {
				t.Fatalf("%s %s: compacted, typed %s; the document types %s", gvk, path, c, typ)
			}
		}
	})
}
