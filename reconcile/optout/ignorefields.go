package optout

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"recond.dev/recond/reconcile/keys"
)

// ignoreFields removes from obj the fields v (recond.dev/ignore-fields,
// comma-separated JSON pointers) names, and returns the pointers.
func ignoreFields(obj *unstructured.Unstructured, v string) ([]string, error) {
	var ptrs []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		path, err := parsePointer(p)
		if err != nil {
			return nil, fmt.Errorf("annotation %s: %q: %w", keys.AnnotationIgnoreFields, p, err)
		}
		if err := removePath(obj.Object, path); err != nil {
			return nil, fmt.Errorf("annotation %s: %q: %w", keys.AnnotationIgnoreFields, p, err)
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
		parts[0] == "metadata" && len(parts) == 3 && parts[1] == "labels" && parts[2] == keys.LabelManagedBy:
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
