package reconcile

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"recond.dev/recond/reconcile/keys"
)

// The per-object opt-outs: annotations an object carries in Git (and, for
// AnnotationReconcile, on the live object too) that take it, or part of
// it, out of the loop's hands. The names and values are a contract.
const (
	// AnnotationReconcile "disabled": the object is neither written, healed
	// nor pruned; it is counted and listed as skipped.
	AnnotationReconcile = keys.AnnotationReconcile
	// AnnotationApply "create-only": created when missing, never updated.
	AnnotationApply = keys.AnnotationApply
	// AnnotationPrune "disabled": never deleted; when it leaves Git it
	// loses recond's labels (it is orphaned), with an Event.
	AnnotationPrune = keys.AnnotationPrune
	// AnnotationIgnoreFields is a comma-separated list of JSON pointers
	// (RFC 6901) to fields that are neither compared nor sent, so that
	// another manager may own them: "/spec/replicas,/data/generated".
	AnnotationIgnoreFields = keys.AnnotationIgnoreFields
)

// SkipReason says why the loop left an object, or part of one, alone. The
// values are a contract: recond_skipped_resources{reason} uses them.
type SkipReason string

// Every reason an object is skipped.
const (
	SkipReconcileDisabled SkipReason = "reconcile_disabled"
	SkipCreateOnly        SkipReason = "create_only"
	SkipPruneDisabled     SkipReason = "prune_disabled"
	SkipIgnoreFields      SkipReason = "ignore_fields"
)

// SkipReasons lists every SkipReason, so that labelled series can be
// pre-initialised.
var SkipReasons = []SkipReason{SkipReconcileDisabled, SkipCreateOnly, SkipPruneDisabled, SkipIgnoreFields}

// Skip is one object an opt-out held back at a tick: all of it
// (reconcile_disabled; create_only: an update not made; prune_disabled: a
// delete not made, the object orphaned instead) or some of its fields
// (ignore_fields).
type Skip struct {
	Kind   string     `json:"kind"`
	Name   string     `json:"name"`
	Reason SkipReason `json:"reason"`
	// Fields are the ignored fields' pointers (ignore_fields).
	Fields []string `json:"fields,omitempty"`
}

func (s Skip) String() string {
	out := s.Kind + "/" + s.Name + " (" + string(s.Reason)
	if len(s.Fields) > 0 {
		out += ": " + strings.Join(s.Fields, ",")
	}
	return out + ")"
}

// annotation returns an annotation of u without copying its annotations
// (GetAnnotations copies the map: a converged tick must not, per object).
func annotation(u *unstructured.Unstructured, key string) (string, bool) {
	if u == nil {
		return "", false
	}
	m, ok := u.Object["metadata"].(map[string]any)
	if !ok {
		return "", false
	}
	ann, ok := m["annotations"].(map[string]any)
	if !ok {
		return "", false
	}
	v, ok := ann[key].(string)
	return v, ok
}

// reconcileDisabled reports whether u says recond.dev/reconcile: disabled.
func reconcileDisabled(u *unstructured.Unstructured) bool {
	v, _ := annotation(u, AnnotationReconcile)
	return v == "disabled"
}

// checkOptOuts checks the opt-out annotations of a desired object and
// applies recond.dev/ignore-fields to it: the fields are removed (neither
// compared nor sent). It returns the ignored pointers. A value it does not
// know fails the read phase, naming the object and the annotation: an
// opt-out misspelt is not silently ignored.
func checkOptOuts(obj *unstructured.Unstructured) ([]string, error) {
	ann := obj.GetAnnotations()
	for _, c := range []struct{ key, want string }{
		{AnnotationReconcile, "disabled"},
		{AnnotationApply, "create-only"},
		{AnnotationPrune, "disabled"},
		{AnnotationForce, "recreate"},
	} {
		if v, ok := ann[c.key]; ok && v != c.want && v != "" {
			return nil, fmt.Errorf("annotation %s: %q is not a value recond knows (want %q)", c.key, v, c.want)
		}
	}
	v, ok := ann[AnnotationIgnoreFields]
	if !ok {
		return nil, nil
	}
	var ptrs []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		path, err := parsePointer(p)
		if err != nil {
			return nil, fmt.Errorf("annotation %s: %q: %w", AnnotationIgnoreFields, p, err)
		}
		if err := removePath(obj.Object, path); err != nil {
			return nil, fmt.Errorf("annotation %s: %q: %w", AnnotationIgnoreFields, p, err)
		}
		ptrs = append(ptrs, p)
	}
	return ptrs, nil
}

// parsePointer parses a JSON pointer (RFC 6901) to a field an object may
// leave to another manager: not the object's identity, nor recond's labels
// and annotations.
func parsePointer(p string) ([]string, error) {
	if !strings.HasPrefix(p, "/") {
		return nil, fmt.Errorf("a JSON pointer starts with /")
	}
	if strings.IndexFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
		return nil, fmt.Errorf("a control character in a JSON pointer")
	}
	parts := strings.Split(p[1:], "/")
	for i, s := range parts {
		if strings.Contains(strings.NewReplacer("~0", "", "~1", "").Replace(s), "~") {
			return nil, fmt.Errorf("~ is written ~0 in a JSON pointer (and / is ~1)")
		}
		s = strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
		if s == "" {
			return nil, fmt.Errorf("empty path segment")
		}
		parts[i] = s
	}
	switch {
	case parts[0] == "apiVersion" || parts[0] == "kind":
		return nil, fmt.Errorf("the object's type is not a field to leave to another manager")
	case parts[0] == "metadata" && (len(parts) == 1 || slices.Contains([]string{"name", "namespace", "labels", "annotations"}, parts[1]) && len(parts) <= 2):
		return nil, fmt.Errorf("the object's identity, labels or annotations as a whole are not fields to leave to another manager (name one label or annotation)")
	case parts[0] == "metadata" && len(parts) == 3 && (parts[1] == "labels" || parts[1] == "annotations") && strings.HasPrefix(parts[2], "recond.dev/"),
		parts[0] == "metadata" && len(parts) == 3 && parts[1] == "labels" && parts[2] == LabelManagedBy:
		return nil, fmt.Errorf("recond's own labels and annotations cannot be ignored")
	}
	return parts, nil
}

// removePath removes the field at path from obj (nothing when it is not
// there). A path through a list is refused: a list element has no stable
// name to leave to another manager; ignore the list as a whole.
func removePath(obj map[string]any, path []string) error {
	cur := obj
	for i, key := range path {
		v, ok := cur[key]
		if !ok {
			return nil
		}
		if i == len(path)-1 {
			delete(cur, key)
			return nil
		}
		switch next := v.(type) {
		case map[string]any:
			cur = next
		case []any:
			return fmt.Errorf("/%s is a list: ignore it as a whole", strings.Join(path[:i+1], "/"))
		default:
			return nil
		}
	}
	return nil
}

// optOuts takes the objects recond.dev/reconcile: disabled (in Git or on
// the live object) out of the comparison, desired and live alike: neither
// written, healed nor pruned. It records them as skipped, with the objects
// whose fields recond.dev/ignore-fields leaves out.
func optOuts(st *State, desired, live []*unstructured.Unstructured) ([]*unstructured.Unstructured, []*unstructured.Unstructured) {
	// The live objects first: an opt-out there is rare, and finding none
	// costs no allocation, so that a converged tick stays cheap.
	var off map[string]bool
	for _, l := range st.Live {
		for _, key := range []string{AnnotationReconcile, AnnotationPrune} {
			if v, ok := annotation(l, key); ok && v != "disabled" && v != "" {
				st.misspelt = append(st.misspelt, fmt.Sprintf("%s/%s: %s: %q (want %q)", l.GetKind(), l.GetName(), key, v, "disabled"))
			}
		}
		if reconcileDisabled(l) {
			if off == nil {
				off = map[string]bool{}
			}
			off[objectKey(l)] = true
			st.skip(l, SkipReconcileDisabled, nil)
		}
	}
	listed := len(off) > 0
	for _, d := range st.Desired {
		disabled := reconcileDisabled(d)
		if !disabled && !listed && len(st.Ignored) == 0 {
			continue
		}
		k := objectKey(d)
		switch {
		case off[k]:
			// Disabled on the live object: listed already.
		case disabled:
			if off == nil {
				off = map[string]bool{}
			}
			off[k] = true
			st.skip(d, SkipReconcileDisabled, nil)
		case len(st.Ignored[k]) > 0:
			st.skip(d, SkipIgnoreFields, st.Ignored[k])
		}
	}
	if len(off) == 0 {
		return desired, live
	}
	keep := func(in []*unstructured.Unstructured) []*unstructured.Unstructured {
		out := make([]*unstructured.Unstructured, 0, len(in))
		for _, u := range in {
			if !off[objectKey(u)] {
				out = append(out, u)
			}
		}
		return out
	}
	return keep(desired), keep(live)
}

// orphanPatch removes recond's ownership labels and provenance
// annotations from an object (recond.dev/prune: disabled that left Git):
// it is no longer recond's, and never pruned.
var orphanPatch = []byte(`{"metadata":{"labels":{"` + LabelManagedBy + `":null,"` + LabelInstance + `":null},"annotations":{"` +
	AnnotationRevision + `":null,"` + AnnotationSource + `":null}}}`)

// refOf is a reference to a live object.
func refOf(u *unstructured.Unstructured) ObjectRef {
	return ObjectRef{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Name: u.GetName(), UID: u.GetUID(), ResourceVersion: u.GetResourceVersion()}
}
