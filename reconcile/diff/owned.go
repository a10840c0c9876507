package diff

import (
	"bytes"
	"cmp"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// owned returns the fields manager owns on live through Apply operations on
// the main resource, or nil when it owns none (or manager is empty). An
// entry whose fieldsV1 does not parse is skipped.
func owned(live *unstructured.Unstructured, manager string) *fieldpath.Set {
	if manager == "" {
		return nil
	}
	var set *fieldpath.Set
	for _, e := range ManagedFields(live) {
		if e.Manager != manager || e.Operation != metav1.ManagedFieldsOperationApply ||
			e.Subresource != "" || e.FieldsV1 == nil {
			continue
		}
		s := &fieldpath.Set{}
		if err := s.FromJSON(bytes.NewReader(e.FieldsV1.Raw)); err != nil {
			continue
		}
		if set == nil {
			set = s
		} else {
			set = set.Union(s)
		}
	}
	return set
}

// removals adds a difference, with Desired nil, for every field in set that
// desired no longer has and live still has: applying desired removes it.
// Owned paths are tried shortest first and one under a path already reported
// is dropped, so a removed list item is one difference, not one per field.
// Paths under a skipped path (identity, server metadata, ignored
// annotations) are never reported.
func (w *walker) removals(desired, live map[string]any, set *fieldpath.Set) {
	if set == nil {
		return
	}
	var missing []fieldpath.Path
	set.Iterate(func(p fieldpath.Path) {
		if !has(desired, p) {
			missing = append(missing, p.Copy())
		}
	})
	slices.SortStableFunc(missing, func(a, b fieldpath.Path) int {
		return cmp.Or(cmp.Compare(len(a), len(b)), a.Compare(b))
	})

	covered := make([]string, 0, len(w.diffs)+len(missing))
	for _, d := range w.diffs {
		covered = append(covered, d.Path)
	}
	for _, p := range missing {
		s, skip := w.pathString(p)
		if skip || slices.ContainsFunc(covered, func(c string) bool { return within(s, c) }) {
			continue
		}
		if lv, ok := resolve(live, p); ok {
			covered = append(covered, s)
			w.add(s, lv, nil)
		}
	}
}

// has reports whether desired sets the field at p. A list-map key field that
// the item leaves to its default (protocol under
// k:{"port":80,"protocol":"TCP"}) counts as set: the item matched it.
func has(desired map[string]any, p fieldpath.Path) bool {
	var cur any = desired
	for i, pe := range p {
		next, ok := step(cur, pe)
		if !ok {
			return pe.FieldName != nil && i > 0 && keyHas(p[i-1], *pe.FieldName)
		}
		cur = next
	}
	return true
}

// resolve returns the value at p in obj.
func resolve(obj map[string]any, p fieldpath.Path) (any, bool) {
	var cur any = obj
	for _, pe := range p {
		next, ok := step(cur, pe)
		if !ok {
			return nil, false
		}
		cur = next
	}
	return cur, true
}

// step descends one path element into a decoded value; null counts as
// absent.
func step(cur any, pe fieldpath.PathElement) (any, bool) {
	if pe.FieldName != nil {
		m, _ := cur.(map[string]any)
		v := m[*pe.FieldName]
		return v, v != nil
	}
	list, _ := cur.([]any)
	switch {
	case pe.Key != nil:
		for _, it := range list {
			if m, ok := it.(map[string]any); ok && keyMatches(m, *pe.Key) {
				return m, true
			}
		}
	case pe.Value != nil:
		want := (*pe.Value).Unstructured()
		for _, it := range list {
			if deepEqual(it, want) {
				return it, true
			}
		}
	case pe.Index != nil:
		if i := *pe.Index; i < len(list) && list[i] != nil {
			return list[i], true
		}
	}
	return nil, false
}

func keyMatches(m map[string]any, key value.FieldList) bool {
	for _, f := range key {
		v := m[f.Name]
		if v == nil {
			v = keyDefaults[f.Name]
		}
		if !deepEqual(v, f.Value.Unstructured()) {
			return false
		}
	}
	return true
}

func keyHas(pe fieldpath.PathElement, name string) bool {
	if pe.Key == nil {
		return false
	}
	for _, f := range *pe.Key {
		if f.Name == name {
			return true
		}
	}
	return false
}

// pathString renders p in FieldDiff.Path form and reports whether p or one
// of its prefixes is skipped.
func (w *walker) pathString(p fieldpath.Path) (string, bool) {
	var s string
	skip := false
	for _, pe := range p {
		switch {
		case pe.FieldName != nil:
			s = join(s, *pe.FieldName)
		case pe.Key != nil:
			parts := make([]string, len(*pe.Key))
			for i, f := range *pe.Key {
				parts[i] = f.Name + "=" + formatScalar(f.Value.Unstructured())
			}
			s += "[" + strings.Join(parts, ",") + "]"
		case pe.Value != nil:
			s += "[=" + formatScalar((*pe.Value).Unstructured()) + "]"
		case pe.Index != nil:
			s += "[" + strconv.Itoa(*pe.Index) + "]"
		}
		skip = skip || w.skip[s]
	}
	return s, skip
}
