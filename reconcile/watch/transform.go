package watch

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"recond.dev/recond/reconcile/diff"
)

// lastApplied is kubectl's client-side apply annotation: a second copy of
// the object that the diff never reads.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// stubKeys are the parts of another manager's managedFields entry that are
// kept: enough to tell who changed an object and when, not what.
var stubKeys = []string{"manager", "operation", "apiVersion", "time", "subresource"}

// transform cuts an object down to what the diff and the event filter read.
// It edits the object in place (the informer hands it over) and works on
// the unstructured map directly: no typed round trip per event.
func transform(manager string) func(any) (any, error) {
	return func(obj any) (any, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil
		}
		md, ok := u.Object["metadata"].(map[string]any)
		if !ok {
			return obj, nil
		}
		if entries, ok := md["managedFields"].([]any); ok {
			md["managedFields"] = trimManagedFields(entries, manager)
		}
		if ann, ok := md["annotations"].(map[string]any); ok {
			delete(ann, lastApplied)
			if len(ann) == 0 {
				delete(md, "annotations")
			}
		}
		return obj, nil
	}
}

// trimManagedFields keeps manager's entries whole (the diff reads its
// Apply entry to find removed fields), their field sets as JSON text
// (diff.CompactFieldsV1: a tenth of the memory of the decoded tree), and
// every other entry as a stub.
func trimManagedFields(entries []any, manager string) []any {
	out := make([]any, 0, len(entries))
	for _, e := range entries {
		m, ok := e.(map[string]any)
		if !ok {
			continue
		}
		if m["manager"] == manager {
			diff.CompactFieldsV1(m)
			out = append(out, m)
			continue
		}
		stub := make(map[string]any, len(stubKeys))
		for _, k := range stubKeys {
			if v, ok := m[k]; ok {
				stub[k] = v
			}
		}
		out = append(out, stub)
	}
	return out
}
