package diff

import (
	"encoding/json"
	"slices"
	"strings"

	"recond.dev/recond/internal/redact"
	"recond.dev/recond/reconcile/keys"
)

// Sensitive are values that are secret wherever they appear, not only in a
// Secret's data: the values recond decrypted (a Helm values file's
// encrypted values, which a template may copy into a ConfigMap or an
// environment variable), each in every form a template may write it
// (redact.New: base64, JSON, a float Helm printed, ...). A difference whose
// live or desired value holds one is masked like a Secret's (see
// FieldDiff), both sides; so is a field removed from an object that holds
// one, whose old value may be an older secret; a map key that holds one is
// replaced by its mask in the difference's path. A nil *Sensitive holds
// nothing.
//
// It is the one value set of package redact: what finds a value in a
// difference is what removes it from every other output.
type Sensitive = redact.Set

// maskPath is path as a difference shows it: every secret value in it (a
// map key) replaced by its mask and, below a field the objects'
// maskSensitive is maskAll that also masks the map keys that hold a
// sensitive value, and every key of a map that lies within a field the
// objects' MaskedFieldsAnnotation names (see maskPath).
func (w *walker) maskSensitive(path string, v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return w.maskAll(path, v)
	}
	keys := w.underMasked(path)
	out := make(map[string]any, len(m))
	for k, c := range m {
		if keys || w.sensitive.Contains(k) {
			k = w.maskText(k)
		}
		out[k] = w.maskSensitive(join(path, k), c)
	}
	return out
}

// underMasked reports whether path is, or lies within, a field the
// objects' MaskedFieldsAnnotation names.
func (w *walker) underMasked(path string) bool {
	for _, f := range w.maskedFields() {
		if f != "" && within(path, f) {
			return true
		}
	}
	return false
}

// MaskedFieldsAnnotation names, the rest of the path one mask. Such a
// field is a map whose keys held a value when the object was written
// (Fields names the map, never the key) or a list that held one: its keys
// and list selectors may be values no process knows any more (a rotated
// value used as a key, read by `recond diff` in CI or by a restarted
// recond that never decrypted the old revision), so none is shown. The
// field's own path is shown, and the mask is salted like every other, so
// that two different keys show two different masks.
func (w *walker) maskPath(path string) string {
	cut := ""
	for _, f := range w.maskedFields() {
		if f != "" && path != f && within(path, f) && (cut == "" || len(f) < len(cut)) {
			cut = f
		}
	}
	if cut != "" {
		rest := strings.TrimPrefix(path[len(cut):], ".")
		return cut + "." + w.maskText(rest)
	}
	return w.sensitive.Replace(path, w.maskText)
}

// MaskedFieldsAnnotation names, on an object that holds a decrypted value,
// the fields that hold one: comma-separated paths of map keys, each cut at
// the first list ("data.url", "spec.template.spec.containers"), as a JSON
// list (MaskedFields); a value that is not one masks every field. recond
// writes it with the object, so that whatever process compares that object
// later (a `recond diff` of a revision that no longer decrypts the value, a
// restarted recond) masks every difference in those fields, on both sides:
// the live object may still hold an old decrypted value that no process
// knows any more. It names paths, never a value.
const MaskedFieldsAnnotation = keys.AnnotationMaskedFields

// Fields are the fields of obj (a decoded object) that hold a value of s,
// as MaskedFieldsAnnotation writes them, sorted; nil for none.
func Fields(s *Sensitive, obj map[string]any) []string {
	if s == nil {
		return nil
	}
	seen := map[string]bool{}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				if path != "" && s.Contains(k) {
					// A key holds one: its map is masked, and nothing under
					// the key is named (the annotation would show it).
					seen[path] = true
					continue
				}
				if path == "" && k == "metadata" {
					// Only labels and annotations may hold a value there.
					m, _ := c.(map[string]any)
					for _, f := range []string{"labels", "annotations"} {
						walk("metadata."+f, m[f])
					}
					continue
				}
				walk(join(path, k), c)
			}
		case []any:
			if s.In(x) {
				seen[path] = true
			}
		default:
			if s.In(x) {
				seen[path] = true
			}
		}
	}
	walk("", obj)
	if len(seen) == 0 {
		return nil
	}
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// MaskedFields is the value of MaskedFieldsAnnotation for fields: a JSON
// list (a key may hold a comma).
func MaskedFields(fields []string) string {
	b, _ := json.Marshal(fields)
	return string(b)
}

// maskedFields are the fields an object's MaskedFieldsAnnotation names.
func maskedFields(obj map[string]any) []string {
	md, _ := obj["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	v, _ := ann[MaskedFieldsAnnotation].(string)
	if v == "" {
		return nil
	}
	var fields []string
	if err := json.Unmarshal([]byte(v), &fields); err != nil {
		return []string{""} // unreadable: every field is masked
	}
	return fields
}

// inMasked reports whether a difference at path touches one of fields: it
// lies within one, or holds one.
func inMasked(path string, fields []string) bool {
	for _, f := range fields {
		if f == "" || within(path, f) || within(f, path) || path == "" {
			return true
		}
	}
	return false
}
