package diff

import (
	"encoding/json"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ManagedFields returns obj's managedFields entries, as
// (*unstructured.Unstructured).GetManagedFields does, without copying the
// object first. An entry's fieldsV1 may be held either decoded (a map, as
// the API server's JSON decodes) or as its JSON text (a string): the form a
// watch cache keeps a field set it holds for long in, a fraction of the
// memory of the decoded map (CompactFieldsV1). An entry that is not an
// object is skipped.
func ManagedFields(obj *unstructured.Unstructured) []metav1.ManagedFieldsEntry {
	md, _ := obj.Object["metadata"].(map[string]any)
	items, _ := md["managedFields"].([]any)
	if len(items) == 0 {
		return nil
	}
	out := make([]metav1.ManagedFieldsEntry, 0, len(items))
	for _, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			continue
		}
		e := metav1.ManagedFieldsEntry{
			Manager:     str(m["manager"]),
			Operation:   metav1.ManagedFieldsOperationType(str(m["operation"])),
			APIVersion:  str(m["apiVersion"]),
			FieldsType:  str(m["fieldsType"]),
			Subresource: str(m["subresource"]),
		}
		if s := str(m["time"]); s != "" {
			if t, err := time.Parse(time.RFC3339, s); err == nil {
				mt := metav1.NewTime(t.Local())
				e.Time = &mt
			}
		}
		switch f := m["fieldsV1"].(type) {
		case string:
			e.FieldsV1 = &metav1.FieldsV1{Raw: []byte(f)}
		case map[string]any:
			if raw, err := json.Marshal(f); err == nil {
				e.FieldsV1 = &metav1.FieldsV1{Raw: raw}
			}
		}
		out = append(out, e)
	}
	return out
}

// CompactFieldsV1 replaces a managedFields entry's decoded fieldsV1 (a map)
// with its JSON text, which ManagedFields reads back. A Deployment's field
// set decoded is a tree of small maps, some 7 KiB; its text is a tenth of
// that. Only for objects held for long whose field sets are read with
// ManagedFields, or not at all (a watch cache, what a tick applied):
// GetManagedFields and the typed conversions do not read the text form.
func CompactFieldsV1(entry map[string]any) {
	f, ok := entry["fieldsV1"].(map[string]any)
	if !ok {
		return
	}
	if raw, err := json.Marshal(f); err == nil {
		entry["fieldsV1"] = string(raw)
	}
}

func str(v any) string {
	s, _ := v.(string)
	return s
}
