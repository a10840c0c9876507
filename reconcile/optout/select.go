package optout

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"recond.dev/recond/reconcile/keys"
)

// Selection is what the opt-outs of a tick's objects decide before the
// diff: the objects recond.dev/reconcile: disabled takes out (in Git or on
// the live object), desired and live alike (neither written, healed nor
// pruned), and the objects whose fields recond.dev/ignore-fields leaves
// out.
type Selection struct {
	// Skipped are the objects held back, all of them or some fields.
	Skipped []Skip
	// Misspelt are the live objects' opt-out annotations with a value
	// recond does not know ("Kind/name: key: value (want ...)"): ignored,
	// and said.
	Misspelt []string
	off      map[string]bool
	key      func(*unstructured.Unstructured) string
}

// Select reads the opt-outs of every desired and live object of a tick.
// ignored are the pointers Check returned, by key; key identifies an object
// across desired and live.
func Select(desired, live []*unstructured.Unstructured, ignored map[string][]string, key func(*unstructured.Unstructured) string) Selection {
	s := Selection{key: key}
	// The live objects first: an opt-out there is rare, and finding none
	// costs no allocation, so that a converged tick stays cheap.
	for _, l := range live {
		for _, k := range []string{keys.AnnotationReconcile, keys.AnnotationPrune} {
			if v, ok := Annotation(l, k); ok && v != "disabled" && v != "" {
				s.Misspelt = append(s.Misspelt, fmt.Sprintf("%s/%s: %s: %q (want %q)", l.GetKind(), l.GetName(), k, v, "disabled"))
			}
		}
		if Disabled(l) {
			if s.off == nil {
				s.off = map[string]bool{}
			}
			s.off[key(l)] = true
			s.Skipped = append(s.Skipped, SkipOf(l, ReconcileDisabled, nil))
		}
	}
	listed := len(s.off) > 0
	for _, d := range desired {
		disabled := Disabled(d)
		if !disabled && !listed && len(ignored) == 0 {
			continue
		}
		k := key(d)
		switch {
		case s.off[k]:
			// Disabled on the live object: listed already.
		case disabled:
			if s.off == nil {
				s.off = map[string]bool{}
			}
			s.off[k] = true
			s.Skipped = append(s.Skipped, SkipOf(d, ReconcileDisabled, nil))
		case len(ignored[k]) > 0:
			s.Skipped = append(s.Skipped, SkipOf(d, IgnoreFields, ignored[k]))
		}
	}
	return s
}

// Keep returns the objects of in that no recond.dev/reconcile: disabled
// takes out: in itself when there are none.
func (s Selection) Keep(in []*unstructured.Unstructured) []*unstructured.Unstructured {
	if len(s.off) == 0 {
		return in
	}
	out := make([]*unstructured.Unstructured, 0, len(in))
	for _, u := range in {
		if !s.off[s.key(u)] {
			out = append(out, u)
		}
	}
	return out
}
