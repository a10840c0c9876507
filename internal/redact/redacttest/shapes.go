// Package redacttest holds the secret value shapes every output's test
// feeds through its output, and the forms in which an output may show
// each: one table for every package's test, so that a new shape is tried
// everywhere at once.
package redacttest

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

// Shape is a secret value of one shape.
type Shape struct {
	Name string
	// Value is the value as decrypted (or as a Secret's stringData holds it).
	Value string
	// Core is the random part of Value: no output may show it, however
	// it shows the rest.
	Core string
	// Number is set when a template engine reads Value as a number.
	Number bool
	// Indicator is set when Value starts with a YAML indicator: written
	// unquoted into a document, a parser fails on it, quoting a part.
	Indicator bool
}

// Form is one way an output shows a value.
type Form struct {
	Name, Text string
}

// random is a hex text no output holds by chance.
func random(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// Value is a secret value no message can contain by chance.
func Value(t testing.TB) string {
	t.Helper()
	return "v" + random(t, 12)
}

// Digits is a 30-digit number (outside int64) no message can contain by
// chance.
func Digits(t testing.TB) string {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Exp(big.NewInt(10), big.NewInt(29), nil))
	if err != nil {
		t.Fatal(err)
	}
	return "9" + fmt.Sprintf("%029s", n.String())
}

// Renderings are every way an error is turned into text.
func Renderings(err error) string {
	return err.Error() + fmt.Sprintf("\n%v\n%+v\n%#v\n%q", err, err, err, err)
}

// Shapes are the value shapes: letters and digits; with '-'; non-ASCII;
// with quotes, a backslash and HTML's characters (escaped by JSON and
// %q); multi-line key material; an integer (a float once Helm read it);
// starting with a YAML indicator (an alias, a tag, an anchor).
func Shapes(t testing.TB) []Shape {
	t.Helper()
	body := strings.ToUpper(random(t, 24)) + "+/" + random(t, 8)
	n, err := rand.Int(rand.Reader, big.NewInt(80_000_000))
	if err != nil {
		t.Fatal(err)
	}
	digits := strconv.FormatInt(n.Int64()+10_000_001, 10) // 8 digits: Helm prints 1.2345679e+07
	alias := "Xk" + random(t, 6)
	tag := "Tg" + random(t, 6)
	anchor := "An" + random(t, 6)
	letters, d1, d2, other, quoted := random(t, 10), random(t, 4), random(t, 4), random(t, 6), random(t, 6)
	return []Shape{
		{Name: "letters and digits", Value: "v" + letters, Core: letters},
		{Name: "dashes", Value: "pw-" + d1 + "-" + d2, Core: d1 + "-" + d2},
		{Name: "non-ASCII", Value: "пароль-密码-" + other, Core: other},
		{Name: "quotes, backslash, HTML", Value: `p"q\r<s>&'` + quoted, Core: quoted},
		{Name: "multi-line key", Value: "-----BEGIN PRIVATE KEY-----\n" + body + "\n-----END PRIVATE KEY-----\n", Core: body},
		{Name: "number", Value: digits, Core: digits, Number: true},
		{Name: "YAML alias", Value: "*" + alias, Core: alias, Indicator: true},
		{Name: "YAML tag", Value: "!!int " + tag, Core: tag, Indicator: true},
		{Name: "YAML anchor", Value: "&" + anchor + " rest", Core: anchor, Indicator: true},
	}
}

// Secret is what no output may show of s, in any form: its random part.
func (s Shape) Secret() string { return s.Core }

// Forms are the texts an output may show s as: as it is, base64-encoded
// with and without a trailing newline, quoted by JSON (with and without
// HTML escapes) and by %q, indented into a file (a multi-line value),
// printed by Helm (a number), and quoted by the YAML parser's error (a
// value starting with an indicator).
func (s Shape) Forms(t testing.TB) []Form {
	t.Helper()
	v := strings.TrimSpace(s.Value)
	js, _ := json.Marshal(v)
	var plain strings.Builder
	enc := json.NewEncoder(&plain)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	out := []Form{
		{"as it is", v},
		{"base64", base64.StdEncoding.EncodeToString([]byte(v))},
		{"base64 with a newline", base64.StdEncoding.EncodeToString([]byte(v + "\n"))},
		{"JSON", string(js)},
		{"JSON without HTML escapes", strings.TrimSpace(plain.String())},
		{"JSON twice", mustJSON(string(js))},
		{"%q", fmt.Sprintf("%q", v)},
		{"%+q", fmt.Sprintf("%+q", v)},
	}
	if strings.Contains(v, "\n") {
		out = append(out, Form{"indented", "key: |\n    " + strings.ReplaceAll(v, "\n", "\n    ") + "\n"})
	}
	if s.Number {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, Form{"as Helm prints a number", fmt.Sprint(f)}, Form{"%g", strconv.FormatFloat(f, 'g', -1, 64)},
			Form{"%E", strconv.FormatFloat(f, 'E', -1, 64)})
	}
	if e := YAMLError(t, "k: "+v+"\n"); s.Indicator && e != "" {
		out = append(out, Form{"YAML parser error", e})
	}
	return out
}

func mustJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// YAMLError is the error text of go.yaml.in/yaml/v3 decoding doc into a
// value (an alias it does not know, a tag it cannot resolve), or "".
func YAMLError(t testing.TB, doc string) string {
	t.Helper()
	var v any
	if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
		return err.Error()
	}
	return ""
}
