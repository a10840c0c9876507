package diff

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
)

// Sensitive are values that are secret wherever they appear, not only in a
// Secret's data: the values recond decrypted (a Helm values file's
// encrypted values, which a template may copy into a ConfigMap or an
// environment variable). A difference whose live or desired value holds
// one is masked like a Secret's (see FieldDiff), both sides; so is a field
// removed from an object that holds one, whose old value may be an older
// secret. A nil *Sensitive holds nothing.
//
// A value is found as it is, line by line when it has several (a PEM
// indented into a config file), as JSON and Go quote it (toJson, %q),
// and base64-encoded (a template's b64enc, a ConfigMap's binaryData, with
// or without a trailing newline); in a field's value and in a map key. A
// value shorter than MinSensitive is found only as a whole field or key,
// so that "1" does not mask every number. A value a template transforms
// otherwise (a part of it encoded, upper-cased, hashed) is not recognised:
// docs/secrets.md says to keep decrypted values in Secrets.
type Sensitive struct {
	long  []string        // found inside a field's text, longest first
	whole map[string]bool // found as a field's whole text
	// multi are the multi-line values, each line's indentation removed,
	// found in a text likewise (indent, nindent, toYaml).
	multi []string
}

// maxTargets bounds what a Sensitive looks for (values and their forms).
const maxTargets = 8192

// MinSensitive is the length from which a sensitive value is found inside
// a longer text.
const MinSensitive = 4

// NewSensitive returns the matcher of values; nil when there are none.
// The booleans "true" and "false" are never sensitive (one bit, and a mask
// on every flag would hide what changed).
func NewSensitive(values ...[]string) *Sensitive {
	s := &Sensitive{whole: map[string]bool{}}
	seen := map[string]bool{}
	add := func(v string) {
		if v == "" || seen[v] || len(seen) >= maxTargets {
			return
		}
		seen[v] = true
		if len(v) < MinSensitive {
			s.whole[v] = true
			return
		}
		s.long = append(s.long, v)
	}
	for _, vs := range values {
		for _, v := range vs {
			if v = strings.TrimSpace(v); v == "" || v == "true" || v == "false" {
				continue
			}
			add(v)
			add(base64.StdEncoding.EncodeToString([]byte(v)))
			add(base64.StdEncoding.EncodeToString([]byte(v + "\n")))
			if js, err := json.Marshal(v); err == nil {
				add(string(js[1 : len(js)-1]))
			}
			if q := strconv.Quote(v); len(q) > 2 {
				add(q[1 : len(q)-1])
			}
			if strings.ContainsAny(v, "\r\n") {
				if m := unindent(v); !seen["\x00"+m] && len(seen) < maxTargets {
					seen["\x00"+m] = true
					s.multi = append(s.multi, m)
				}
				// A line on its own only when it is key material (a PEM's
				// or a key's body): never an armor line, a word or a line
				// of JSON, which other texts hold too.
				for _, line := range strings.FieldsFunc(v, func(r rune) bool { return r == '\n' || r == '\r' }) {
					if line = strings.TrimSpace(line); keyMaterial(line) {
						add(line)
					}
				}
			}
		}
	}
	if len(s.long) == 0 && len(s.whole) == 0 && len(s.multi) == 0 {
		return nil
	}
	// Longest first: a value that begins another is not replaced in it
	// before the longer one is.
	slices.SortFunc(s.long, func(a, b string) int { return len(b) - len(a) })
	return s
}

// unindent is v with every line's leading blanks removed.
func unindent(v string) string {
	lines := strings.Split(strings.ReplaceAll(v, "\r\n", "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimLeft(l, " \t")
	}
	return strings.Join(lines, "\n")
}

// keyMaterial reports whether a line is at least 16 bytes of base64 or
// hexadecimal alphabet: the body of a PEM block or of a key.
func keyMaterial(line string) bool {
	if len(line) < 16 {
		return false
	}
	for _, r := range line {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '+' || r == '/' || r == '=' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// In reports whether v (a decoded JSON value: a map, a list or a scalar)
// holds a sensitive value anywhere.
func (s *Sensitive) In(v any) bool {
	if s == nil {
		return false
	}
	switch x := v.(type) {
	case nil:
		return false
	case map[string]any:
		for k, c := range x {
			if s.text(k) || s.In(c) {
				return true
			}
		}
		return false
	case []any:
		for _, c := range x {
			if s.In(c) {
				return true
			}
		}
		return false
	case string:
		return s.text(x)
	case int64:
		return s.text(strconv.FormatInt(x, 10))
	case float64:
		return s.text(strconv.FormatFloat(x, 'f', -1, 64))
	case bool:
		return false
	}
	return false
}

// Redact replaces every sensitive value in text (a value shorter than
// MinSensitive only where it is a whole word) with "<redacted>".
func (s *Sensitive) Redact(text string) string {
	if s == nil {
		return text
	}
	for _, v := range s.long {
		text = strings.ReplaceAll(text, v, "<redacted>")
	}
	if len(s.whole) > 0 {
		text = redactWords(text, s.whole)
	}
	return text
}

// redactWords replaces the words of text (runs of letters and digits) that
// are in words.
func redactWords(text string, words map[string]bool) string {
	var b strings.Builder
	start := -1
	flush := func(end int) {
		if start >= 0 {
			if w := text[start:end]; words[w] {
				b.WriteString("<redacted>")
			} else {
				b.WriteString(w)
			}
			start = -1
		}
	}
	for i, r := range text {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			if start < 0 {
				start = i
			}
			continue
		}
		flush(i)
		b.WriteRune(r)
	}
	flush(len(text))
	return b.String()
}

// inPath reports whether a difference's path holds a sensitive value (in
// a map key, or a list item's selector).
func (s *Sensitive) inPath(path string) bool {
	if s == nil {
		return false
	}
	for _, v := range s.long {
		if strings.Contains(path, v) {
			return true
		}
	}
	for _, p := range strings.Split(path, ".") {
		if s.whole[p] {
			return true
		}
	}
	return false
}

// redactPath is path with every segment that holds a sensitive value (a
// map key) replaced by its mask.
func (s *Sensitive) redactPath(path string, mask func(string) string) string {
	if !s.inPath(path) {
		return path
	}
	for _, v := range s.long {
		path = strings.ReplaceAll(path, v, mask(v))
	}
	parts := strings.Split(path, ".")
	for i, p := range parts {
		if s.whole[p] {
			parts[i] = mask(p)
		}
	}
	return strings.Join(parts, ".")
}

func (s *Sensitive) text(t string) bool {
	if s.whole[strings.TrimSpace(t)] {
		return true
	}
	for _, v := range s.long {
		if strings.Contains(t, v) {
			return true
		}
	}
	if len(s.multi) > 0 && strings.Contains(t, "\n") {
		u := unindent(t)
		for _, v := range s.multi {
			if strings.Contains(u, v) {
				return true
			}
		}
	}
	return false
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
const MaskedFieldsAnnotation = "recond.dev/masked-fields"

// Fields are the fields of obj (a decoded object) that hold a sensitive
// value, as MaskedFieldsAnnotation writes them, sorted; nil for none.
func (s *Sensitive) Fields(obj map[string]any) []string {
	if s == nil {
		return nil
	}
	seen := map[string]bool{}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				if path != "" && s.text(k) {
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
