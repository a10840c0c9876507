package schema

import (
	"slices"
	"testing"

	"recond.dev/recond/reconcile/diff"
)

// TestCompactAnswersAsDocument walks every kind of the fixtures, each
// property either side describes, list items and a key neither does, to
// some depth, and compares the compacted fields' answers with the parsed
// document's.
func TestCompactAnswersAsDocument(t *testing.T) {
	for _, file := range []string{"autoscaling-v2.json", "core-v1.json", "example.com-v1.json", "gadget-v1.json"} {
		t.Run(file, func(t *testing.T) {
			d, err := parse(readFixture(t, file))
			if err != nil {
				t.Fatal(err)
			}
			c := compact(d)
			if len(c) != len(d.kinds) || len(c) == 0 {
				t.Fatalf("compacted %d kinds of %d", len(c), len(d.kinds))
			}
			w := &compareWalk{t: t, d: d, budget: 300_000}
			for gvk, root := range d.kinds {
				w.kind, w.root, w.froot = gvk.Kind, root, c[gvk]
				w.walk(root, c[gvk], nil)
			}
			t.Logf("%d paths compared", w.compared)
			if w.compared < 10 {
				t.Errorf("compared %d paths: the walk did not descend", w.compared)
			}
		})
	}
}

type compareWalk struct {
	t        *testing.T
	d        *document
	kind     string
	root     *node
	froot    *field
	budget   int
	compared int
}

// walk compares the answers at path, where n is the document's node and f
// the compacted field (either nil when its side describes nothing), and
// descends.
func (w *compareWalk) walk(n *node, f *field, path []string) {
	if len(path) > 9 || w.compared >= w.budget {
		return
	}
	var names []string
	if r := w.d.resolve(n); r != nil {
		for k := range r.Properties {
			names = append(names, k)
		}
	}
	if f != nil && f.sub != nil {
		for k := range f.sub.props {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	names = slices.Compact(append(names, diff.Item, "no-such-field"))
	for _, k := range names {
		p := append(slices.Clip(path), k)
		want := w.d.typeOf(w.root, p)
		got := w.froot.typeOf(p)
		w.compared++
		if got != want {
			w.t.Fatalf("%s %v: compacted %s, document %s", w.kind, p, got, want)
		}
		var nn *node
		if r := w.d.resolve(n); r != nil {
			switch {
			case k == diff.Item:
				nn = r.Items
			case r.Properties[k] != nil:
				nn = r.Properties[k]
			default:
				if _, ok := r.Properties[k]; !ok {
					nn = r.AdditionalProperties
				}
			}
		}
		var nf *field
		if f != nil && f.sub != nil {
			switch {
			case k == diff.Item:
				nf = f.sub.items
			default:
				var ok bool
				if nf, ok = f.sub.props[k]; !ok {
					nf = f.sub.other
				}
			}
		}
		if nn != nil || nf != nil {
			w.walk(nn, nf, p)
		}
	}
}
