package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Mask stands for a secret value removed from a text.
const Mask = "<redacted>"

// MinLength is the length in bytes from which a value is found inside a
// longer word; a shorter one only as a word of its own.
const MinLength = 4

// maxTargets bounds the forms a Set looks for.
const maxTargets = 8192

// Set is a set of secret values in every form an output may show them
// (see the package's documentation). A nil *Set holds nothing. A Set does
// not change once made, and is safe for concurrent use.
type Set struct {
	// targets are found inside a text, longest first.
	targets []target
	// short are the forms shorter than MinLength, found as words only,
	// longest first.
	short []string
	// multi are the multi-line values, each line's leading blanks
	// removed: Contains finds them in a text likewise (indent, nindent,
	// toYaml).
	multi []string
}

// target is one form of a value.
type target struct {
	text string
	// lineOnly is a line of a multi-line value that is not key material:
	// Redact removes it, Contains does not count it (other texts hold
	// the same armor lines, braces and keys).
	lineOnly bool
}

// New returns the set of values, each in every form; nil when there is
// none. Blank values are left out, and so are "true" and "false" (one bit,
// and a mask on every flag would hide what changed).
func New(values ...[]string) *Set {
	b := &builder{seen: map[string]bool{}, s: &Set{}}
	for _, vs := range values {
		for _, v := range vs {
			b.value(v)
		}
	}
	s := b.s
	if len(s.targets) == 0 && len(s.short) == 0 && len(s.multi) == 0 {
		return nil
	}
	slices.SortFunc(s.targets, func(a, b target) int { return longestFirst(a.text, b.text) })
	slices.SortFunc(s.short, longestFirst)
	return s
}

func longestFirst(a, b string) int {
	if len(a) != len(b) {
		return len(b) - len(a)
	}
	return strings.Compare(a, b)
}

type builder struct {
	s    *Set
	seen map[string]bool
}

// add adds one form; lineOnly as target.lineOnly. A form seen as a value
// is never demoted to a line.
func (b *builder) add(v string, lineOnly bool) {
	if v == "" || len(b.seen) >= maxTargets {
		return
	}
	key := v
	if lineOnly {
		key = "\x00" + v
	}
	if b.seen[key] || lineOnly && b.seen[v] {
		return
	}
	b.seen[key] = true
	switch {
	case len(v) >= MinLength:
		b.s.targets = append(b.s.targets, target{text: v, lineOnly: lineOnly})
	case !lineOnly:
		b.s.short = append(b.s.short, v)
	}
}

// value adds every form of one secret value.
func (b *builder) value(raw string) {
	v := strings.TrimSpace(raw)
	if v == "" || v == "true" || v == "false" {
		return
	}
	b.escaped(v, false)
	for _, f := range indicatorForms(v) {
		b.escaped(f, false)
	}
	for _, f := range numberForms(v) {
		b.escaped(f, false)
	}
	for _, e := range []string{v, v + "\n", raw} {
		b.add(base64.StdEncoding.EncodeToString([]byte(e)), false)
	}
	if strings.ContainsAny(v, "\r\n") {
		if m := unindent(v); !b.seen["\x01"+m] && len(b.seen) < maxTargets {
			b.seen["\x01"+m] = true
			b.s.multi = append(b.s.multi, m)
		}
		for _, line := range strings.FieldsFunc(v, func(r rune) bool { return r == '\n' || r == '\r' }) {
			line = strings.TrimSpace(line)
			b.escaped(line, !keyMaterial(line))
		}
	}
}

// escaped adds v as it is and as JSON and Go quote it, once and twice.
func (b *builder) escaped(v string, lineOnly bool) {
	if v == "" {
		return
	}
	b.add(v, lineOnly)
	j := jsonText(v, true)
	b.add(j, lineOnly)
	b.add(jsonText(v, false), lineOnly)
	b.add(jsonText(j, false), lineOnly)
	b.add(inner(strconv.Quote(v)), lineOnly)
	b.add(inner(strconv.QuoteToASCII(v)), lineOnly)
}

// jsonText is v as it stands inside a JSON string, with or without
// encoding/json's escapes of <, > and &.
func jsonText(v string, html bool) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(html)
	if err := enc.Encode(v); err != nil {
		return ""
	}
	return inner(strings.TrimSuffix(buf.String(), "\n"))
}

// inner is a quoted text without its quotes.
func inner(q string) string {
	if len(q) < 2 {
		return ""
	}
	return q[1 : len(q)-1]
}

// indicators are the characters a YAML plain scalar may not start with.
const indicators = "-?:,[]{}#&*!|>'\"%@`"

// indicatorForms are what a YAML parser makes of v, written unquoted into
// a document, when v starts with an indicator: the rest of v, and for an
// alias or anchor ("*x", "&x") its name, for a tag ("!!int x") what
// follows it. Its errors quote those ("unknown anchor 'x' referenced",
// "cannot decode !!str `x` as a !!int").
func indicatorForms(v string) []string {
	if v == "" || !strings.ContainsRune(indicators, rune(v[0])) {
		return nil
	}
	out := []string{strings.TrimSpace(v[1:])}
	switch v[0] {
	case '*', '&':
		// A name ends at a blank or a flow indicator.
		if i := strings.IndexAny(v[1:], " \t\r\n,[]{}"); i >= 0 {
			out = append(out, v[1:1+i], strings.TrimSpace(v[1+i:]))
		}
	case '!':
		if i := strings.IndexAny(v, " \t\r\n"); i >= 0 {
			rest := strings.TrimSpace(v[i:])
			out = append(out, rest)
			out = append(out, indicatorForms(rest)...) // "!!str *x"
		}
	}
	return out
}

// numberForms are the texts a number v becomes once a template engine
// read it as a number: Helm reads a values file's numbers as float64 and
// prints them with fmt's %v (12345679 → 1.2345679e+07); toJson, strconv
// and YAML 1.1 (0x1F, 017) have forms of their own.
func numberForms(v string) []string {
	var out []string
	f, err := strconv.ParseFloat(v, 64)
	if n, ierr := strconv.ParseInt(v, 0, 64); ierr == nil {
		out = append(out, strconv.FormatInt(n, 10))
		if err != nil {
			f, err = float64(n), nil
		}
	}
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return out
	}
	for _, c := range []byte("gGeEf") {
		out = append(out, strconv.FormatFloat(f, c, -1, 64))
	}
	out = append(out, fmt.Sprint(f), fmt.Sprint(float32(f)))
	if js, err := json.Marshal(f); err == nil {
		out = append(out, string(js))
	}
	if f == math.Trunc(f) && math.Abs(f) < 1<<63 {
		out = append(out, strconv.FormatInt(int64(f), 10))
	}
	return out
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
