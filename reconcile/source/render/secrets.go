package render

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"recond.dev/recond/internal/redact"
)

// Secrets is what one render knows to be secret: the values of the
// Secrets it read (under data, decoded too, and stringData), what its
// secretGenerators are made of (literals, env files, files) and every value
// of a file marked secret as a whole (MarkFile: a generator's source, a
// decrypted document). An error of the render may quote none of it:
// redact removes it in every form an error may quote it (redact.New), the
// checks that know they are looking at secret material (numbers, keys,
// generators) never quote it at all, and a parser's error about a
// document that holds some says where, never what (parseError). The zero
// value is ready to use; it is safe for concurrent use (kustomize reads
// from its own goroutine).
type Secrets struct {
	mu     sync.Mutex
	values map[string]struct{}
	files  map[string]bool // repository-relative paths whose whole content is secret
	// patches are the patch files that target a Secret: their data and
	// stringData, or a JSON 6902 patch's values, are secret.
	patches map[string]bool
}

// MarkFile marks the file (a repository-relative path, or the label of a
// render's output) as secret as a whole: every value read from it is
// secret material, and a number in it is reported without its digits.
// A SOPS-decrypted document is marked before its content is inspected.
func (m *Secrets) MarkFile(file string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.files == nil {
		m.files = map[string]bool{}
	}
	m.files[file] = true
}

// isSecretFile reports whether file was marked.
func (m *Secrets) isSecretFile(file string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.files[file]
}

// MarkPatch marks file as a patch of a Secret.
func (m *Secrets) MarkPatch(file string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.patches == nil {
		m.patches = map[string]bool{}
	}
	m.patches[file] = true
}

func (m *Secrets) isPatch(file string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.patches[file]
}

// AddText adds s as a secret value (redact.New finds its lines and its
// other forms).
func (m *Secrets) AddText(s string) {
	s = strings.TrimSpace(s)
	if s == "" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.values == nil {
		m.values = map[string]struct{}{}
	}
	m.values[s] = struct{}{}
}

// set is the value set of what the render knows so far.
func (m *Secrets) set() *redact.Set {
	m.mu.Lock()
	values := make([]string, 0, len(m.values))
	for v := range m.values {
		values = append(values, v)
	}
	m.mu.Unlock()
	return redact.New(values)
}

// AddGenerated adds a value a secretGenerator makes from a literal or a
// file: as it is, and base64-encoded as kustomize writes it under data.
func (m *Secrets) AddGenerated(v string) {
	m.AddText(v)
	m.AddText(base64.StdEncoding.EncodeToString([]byte(v)))
}

// addSecretValue adds a value of a Secret found at field ("data.x",
// "stringData.y"): a data value decoded from base64 too.
func (m *Secrets) addSecretValue(field, v string) {
	m.AddText(v)
	if strings.HasPrefix(field, "data.") {
		if b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v)); err == nil {
			m.AddText(string(b))
		}
	}
}

// addFile adds the content of a file kustomize or the plain reader read,
// when it was marked secret as a whole (a generator's env file or file).
func (m *Secrets) addFile(file string, data []byte) {
	if !m.isSecretFile(file) {
		return
	}
	m.AddGenerated(string(data))
	// An env file's values, after the first '='.
	for _, line := range strings.Split(string(data), "\n") {
		if _, v, ok := strings.Cut(strings.TrimSuffix(line, "\r"), "="); ok {
			m.AddGenerated(v)
		}
	}
}

// addDocument adds the secret values of one parsed YAML document of file:
// every scalar when file is marked, else those of a Secret's data and
// stringData (and of its kubectl last-applied annotation).
func (m *Secrets) addDocument(file string, doc *yaml.Node) {
	root := docRoot(doc)
	if root == nil {
		return
	}
	if m.isSecretFile(file) {
		m.addValues(root)
		return
	}
	if m.isPatch(file) {
		m.addPatch(root)
		return
	}
	if scalar(mapValue(root, "kind")) == "List" || strings.HasSuffix(scalar(mapValue(root, "kind")), "List") {
		if items := mapValue(root, "items"); items != nil && items.Kind == yaml.SequenceNode {
			for _, it := range items.Content {
				m.addSecretNode(it)
			}
		}
		return
	}
	m.addSecretNode(root)
}

func (m *Secrets) addSecretNode(n *yaml.Node) {
	if scalar(mapValue(n, "kind")) == "Secret" {
		m.addSecretFields(n)
	}
}

// addPatch adds the values a patch of a Secret sets: a JSON 6902 patch's
// values, or a strategic merge patch's data and stringData.
func (m *Secrets) addPatch(n *yaml.Node) {
	if n.Kind == yaml.SequenceNode {
		for _, op := range n.Content {
			m.addScalars(mapValue(op, "value"))
		}
		return
	}
	m.addSecretFields(n)
}

func (m *Secrets) addSecretFields(n *yaml.Node) {
	for _, f := range []string{"data", "stringData"} {
		d := mapValue(n, f)
		if d == nil {
			continue
		}
		if d.Kind != yaml.MappingNode {
			m.addScalars(d)
			continue
		}
		for i := 0; i+1 < len(d.Content); i += 2 {
			v := d.Content[i+1]
			if v.Kind == yaml.ScalarNode {
				m.addSecretValue(f+"."+d.Content[i].Value, v.Value)
			} else {
				m.addScalars(v)
			}
		}
	}
	if a := mapValue(mapValue(n, "metadata"), "annotations"); a != nil {
		m.addScalars(mapValue(a, "kubectl.kubernetes.io/last-applied-configuration"))
	}
}

// addValues adds every value of the document root n of a file that is
// secret as a whole, but an object's apiVersion, kind and metadata, which
// name it (a decrypted document keeps them in clear).
func (m *Secrets) addValues(n *yaml.Node) {
	if n.Kind != yaml.MappingNode || mapValue(n, "kind") == nil {
		m.addScalars(n)
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		switch n.Content[i].Value {
		case "apiVersion", "kind", "metadata":
		default:
			m.addScalars(n.Content[i+1])
		}
	}
}

// addScalars adds every scalar value under n (map keys are names, not values).
func (m *Secrets) addScalars(n *yaml.Node) {
	if n == nil {
		return
	}
	switch n.Kind {
	case yaml.ScalarNode:
		m.AddText(n.Value)
	case yaml.MappingNode:
		for i := 1; i < len(n.Content); i += 2 {
			m.addScalars(n.Content[i])
		}
	case yaml.SequenceNode, yaml.DocumentNode:
		for _, c := range n.Content {
			m.addScalars(c)
		}
	}
}

// addJSON adds the secret values of a JSON object (a Secret's data and
// stringData, or all of it when file is marked).
func (m *Secrets) addJSON(file string, v any) {
	obj, _ := v.(map[string]any)
	if m.isSecretFile(file) {
		if obj == nil || obj["kind"] == nil {
			m.addAny(v)
			return
		}
		for k, e := range obj {
			if k != "apiVersion" && k != "kind" && k != "metadata" {
				m.addAny(e)
			}
		}
		return
	}
	if m.isPatch(file) {
		m.addJSONSecret(obj)
		return
	}
	if items, ok := obj["items"].([]any); ok {
		for _, it := range items {
			m.addJSON(file, it)
		}
		return
	}
	if k, _ := obj["kind"].(string); k == "Secret" {
		m.addJSONSecret(obj)
	}
}

func (m *Secrets) addJSONSecret(obj map[string]any) {
	for _, f := range []string{"data", "stringData"} {
		d, ok := obj[f].(map[string]any)
		if !ok {
			m.addAny(obj[f])
			continue
		}
		for k, v := range d {
			if s, ok := v.(string); ok {
				m.addSecretValue(f+"."+k, s)
			} else {
				m.addAny(v)
			}
		}
	}
}

func (m *Secrets) addAny(v any) {
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			m.addAny(e)
		}
	case []any:
		for _, e := range v {
			m.addAny(e)
		}
	case nil:
	default:
		m.AddText(fmt.Sprint(v))
	}
}

// redact returns err with every secret value it quotes replaced by
// redact.Mask. Its structure is kept: a *ManifestError stays one (with its
// File and Object), and errors.Is and errors.As still reach the causes (a
// LimitError, a cancellation); only the text changes. Errors that are
// safe by construction (cancellation, a *secretError) are returned as they
// are.
func (m *Secrets) redact(err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var se *secretError
	if errors.As(err, &se) {
		return err
	}
	values := m.set()
	if values == nil {
		return err
	}
	var me *ManifestError
	if errors.As(err, &me) && me == err {
		msg := me.Err.Error()
		out := values.Redact(msg)
		obj := values.Redact(me.Object)
		if out == msg && obj == me.Object {
			return err
		}
		return &ManifestError{File: me.File, Object: obj, Err: &RedactedError{Msg: out, Err: me.Err}}
	}
	return values.Error(err)
}

// RedactedError is an error whose text had secret values removed (Msg);
// it unwraps to the original (Err) for errors.Is and errors.As, whose own
// text must not be shown.
type RedactedError struct {
	Msg string
	Err error
}

func (e *RedactedError) Error() string { return e.Msg }
func (e *RedactedError) Unwrap() error { return e.Err }

// secretError is an error about secret material written so as to name the
// file, the object and the key, never a value: redact leaves it alone.
type secretError struct{ msg string }

func (e *secretError) Error() string { return e.msg }

// SecretErrorf is an error about secret material, formatted: its text must
// name the file, the object and the key only, never a value; no redaction
// touches it.
func SecretErrorf(format string, args ...any) error {
	return &secretError{msg: fmt.Sprintf(format, args...)}
}

// SafeKey shows a Secret key that the API would refuse, or a text that
// may be a value (a literal that is not KEY=value), as far as
// redact.SafeKey shows it, quoted ("DB_PASSWORD…" for a line written
// "DB_PASSWORD: Hunter2"), and never whole: nothing is shown when it has
// no character a key may not hold (the whole text may be a value).
func SafeKey(k string) string {
	switch shown := redact.SafeKey(k); {
	case shown == "…" && k != "" && !redact.KeyRune([]rune(k)[0]):
		return `(starts with a character a key may not hold)`
	case shown == "…" || shown == k:
		return "(not shown)"
	default:
		return strconv.Quote(shown)
	}
}

// ValidKey reports whether k is a key the API server accepts in a Secret.
func ValidKey(k string) bool { return len(validation.IsConfigMapKey(k)) == 0 }

// KeyRule is what a Secret key may be, for messages.
const KeyRule = "a Secret key is letters, digits, '-', '_' and '.'"

// checkSecretKeys refuses a Secret (the YAML document root of file) whose
// data or stringData has a key the API server would refuse, naming the
// file, the object and as much of the key as cannot be a value: such a
// key is often a value written the wrong way ("DB_PASSWORD: Hunter2" in
// an env file), and the API server's error would quote it whole.
func checkSecretKeys(file, object string, keys func(field string) []string) error {
	for _, f := range []string{"data", "stringData"} {
		for _, k := range keys(f) {
			if !ValidKey(k) {
				return &ManifestError{File: file, Object: object,
					Err: SecretErrorf("%s: key %s is not a valid Secret key (%s; the rest of the key is not shown, as it may hold a value)", f, SafeKey(k), KeyRule)}
			}
		}
	}
	return nil
}

// yamlSecretKeys returns the keys of field of the Secret n.
func yamlSecretKeys(n *yaml.Node) func(string) []string {
	return func(field string) []string {
		d := mapValue(n, field)
		if d == nil || d.Kind != yaml.MappingNode {
			return nil
		}
		var out []string
		for i := 0; i+1 < len(d.Content); i += 2 {
			out = append(out, d.Content[i].Value)
		}
		return out
	}
}

func jsonSecretKeys(obj map[string]any) func(string) []string {
	return func(field string) []string {
		d, _ := obj[field].(map[string]any)
		out := make([]string, 0, len(d))
		for k := range d {
			out = append(out, k)
		}
		sort.Strings(out)
		return out
	}
}

// AddInlinePatch adds the values an inline patch of a Secret sets (YAML or JSON).
func (m *Secrets) AddInlinePatch(patch string) {
	dec := yaml.NewDecoder(strings.NewReader(patch))
	for {
		var n yaml.Node
		if err := dec.Decode(&n); err != nil {
			return
		}
		if root := docRoot(&n); root != nil {
			m.addPatch(root)
		}
	}
}

// secretKind finds a document that is a Secret (or a list of them),
// written as YAML or JSON, without parsing it.
var secretKind = regexp.MustCompile(`(?m)["']?\bkind["']?[ \t]*:[ \t]*["']?Secret`)

// parseError is the error of a YAML or JSON parser (err) about document
// doc of file, whose content is data; relative says its line numbers
// count from the document's first line (a decoder that splits the stream
// first). The parser's message is kept, unless the document may hold
// secret material: the file is marked secret (a decrypted document, a
// generator's source) or a patch of a Secret, it is a Secret, or it holds
// a secret value the render knows. The message may then quote a value
// (an alias "*Xk9…" is reported "unknown anchor 'Xk9…'", a tag "!!int x"
// "cannot decode !!str `x`"), and the error says only where: the
// document, its line and column, as far as the message tells them. What
// the message quotes becomes secret material: kustomize, which parses the
// document again when it is one of its resources, fails quoting the same,
// and its error loses it (redact).
func (m *Secrets) parseError(file string, data []byte, doc int, relative bool, err error) error {
	kind, secretFile, patch := secretKind.Match(data), m.isSecretFile(file), m.isPatch(file)
	known := !kind && !secretFile && !patch && m.set().Contains(string(data))
	if !kind && !secretFile && !patch && !known {
		return fmt.Errorf("document %d: %w", doc, err)
	}
	where := fmt.Sprintf("document %d", doc)
	if line, col := position(data, doc, relative, err); line > 0 {
		where += fmt.Sprintf(", line %d", line)
		if col > 0 {
			where += fmt.Sprintf(", column %d", col)
		}
	}
	what := "YAML"
	if looksLikeJSON(data) {
		what = "JSON"
	}
	for _, q := range quoted.FindAllStringSubmatch(err.Error(), -1) {
		m.AddText(q[1] + q[2])
	}
	return SecretErrorf("%s: not valid %s (the parser's message is not shown: the document holds secret material, which it may quote)", where, what)
}

var (
	// lineOf is where a YAML parser's message names a line.
	lineOf = regexp.MustCompile(`\bline (\d+)\b`)
	// quoted is what it quotes: an alias ('x'), a value (`x`).
	quoted = regexp.MustCompile("'([^'\n]+)'|`([^`\n]+)`")
)

// position is the line and column (from 1; 0 when not known) that err,
// a parser's error about document doc of data, points at: a JSON syntax
// error's offset, the line a YAML parser names, or where what it quotes
// (an unknown alias, a value it cannot read as its tag says) stands.
func position(data []byte, doc int, relative bool, err error) (line, col int) {
	var (
		js  *json.SyntaxError
		ujs utilyaml.JSONSyntaxError
	)
	switch {
	case errors.As(err, &js):
		return lineCol(data, int(js.Offset))
	case errors.As(err, &ujs):
		return lineCol(data, int(ujs.Offset))
	}
	start := 0
	if relative {
		start = docOffset(data, doc)
	}
	msg := err.Error()
	if m := lineOf.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		if relative {
			first, _ := lineCol(data, start)
			n += first - 1
		}
		return n, 0
	}
	if m := quoted.FindStringSubmatch(msg); m != nil {
		tok := m[1] + m[2]
		for _, at := range []string{"*" + tok, tok} {
			if i := bytes.Index(data[start:], []byte(at)); i >= 0 {
				return lineCol(data, start+i)
			}
		}
	}
	return 0, 0
}

// lineCol is the line and column (from 1) of byte offset off of data.
func lineCol(data []byte, off int) (int, int) {
	off = min(max(off, 0), len(data))
	before := data[:off]
	nl := bytes.LastIndexByte(before, '\n')
	return bytes.Count(before, []byte{'\n'}) + 1, utf8.RuneCount(before[nl+1:]) + 1
}

// docOffset is the offset of document doc (from 1) of a YAML stream, as
// k8s.io/apimachinery's YAMLReader splits it: at lines starting with
// "---", a run of nothing but separators making no document. 0 when the
// stream has fewer documents.
func docOffset(data []byte, doc int) int {
	n, start, empty := 1, 0, true
	for off := 0; off < len(data); {
		next := len(data)
		if end := bytes.IndexByte(data[off:], '\n'); end >= 0 {
			next = off + end + 1
		}
		if bytes.HasPrefix(data[off:next], []byte("---")) {
			if !empty {
				if n == doc {
					return start
				}
				n++
			}
			empty = true
		} else if empty {
			start, empty = off, false
		}
		off = next
	}
	if n == doc {
		return start
	}
	return 0
}
