package sops_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	yaml "go.yaml.in/yaml/v3"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/reconcile/source/sops"
)

// fixture is the sops CLI (what the real one made, testenv.SOPS) and three
// age keys made by age-keygen.
type fixture struct {
	s          *testenv.SOPS
	id, rcpt   [3]string
	secretText []string // every identity and plaintext value, which no error may quote
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{s: testenv.NewSOPS(t)}
	for i := range f.id {
		f.id[i], f.rcpt[i] = f.s.Keygen()
		f.secretText = append(f.secretText, f.id[i])
	}
	return f
}

// ids parses a keys file holding identities, as recond reads one.
func (f *fixture) ids(t *testing.T, identities ...string) []age.Identity {
	t.Helper()
	data, err := os.ReadFile(f.s.KeysFile(identities...))
	if err != nil {
		t.Fatal(err)
	}
	ids, err := sops.ParseIdentities(data)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// secret is a value no output holds by chance (the same at every run of
// t, so that the fixture of what sops made of it is found again),
// remembered so that errors can be checked not to quote it.
func (f *fixture) secret(t testing.TB) string {
	v := "s3cr3t" + testenv.FixtureText(t)
	f.secretText = append(f.secretText, v)
	return v
}

// quiet fails the test when err's text holds a secret value or an
// identity.
func (f *fixture) quiet(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	for _, s := range f.secretText {
		if strings.Contains(err.Error(), s) {
			t.Errorf("the error quotes a secret (%.12s…): %v", s, err)
		}
	}
}

// wantError checks err is an *sops.Error with the reason, quoting nothing
// secret, and returns it.
func (f *fixture) wantError(t *testing.T, err error, reason sops.Reason) *sops.Error {
	t.Helper()
	var se *sops.Error
	if !errors.As(err, &se) {
		t.Fatalf("want an *sops.Error (%s), got %v", reason, err)
	}
	if se.Reason != reason {
		t.Errorf("reason %s, want %s: %v", se.Reason, reason, err)
	}
	f.quiet(t, err)
	return se
}

func TestFormatOf(t *testing.T) {
	for path, want := range map[string]sops.Format{
		"a.yaml": sops.YAML, "dir/a.yml": sops.YAML, "a.json": sops.JSON, ".env": sops.Dotenv,
		"app.env": sops.Dotenv, "a.ini": sops.INI, "a.txt": sops.Binary, "a": sops.Binary,
		"a.yaml.bak": sops.Binary, "a.YAML": sops.Binary,
	} {
		if got := sops.FormatOf(path); got != want {
			t.Errorf("FormatOf(%q) = %v, want %v", path, got, want)
		}
	}
}

func TestParseIdentities(t *testing.T) {
	f := newFixture(t)
	pq, _ := f.s.KeygenPQ()
	f.secretText = append(f.secretText, pq)
	good := "# created by age-keygen\r\n\n  " + f.id[0] + "  \r\n# another\n" + pq + "\n"
	ids, err := sops.ParseIdentities([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 2 {
		t.Fatalf("%d identities, want 2", len(ids))
	}
	if _, ok := ids[0].(*age.X25519Identity); !ok {
		t.Errorf("first identity is a %T", ids[0])
	}
	if _, ok := ids[1].(*age.HybridIdentity); !ok {
		t.Errorf("second identity is a %T", ids[1])
	}
	// A key with one character changed fails its checksum: the error names
	// the line, never the key.
	broken := f.id[1][:len(f.id[1])-3] + "QQQ"
	f.secretText = append(f.secretText, broken, broken[16:])
	for name, data := range map[string]string{
		"checksum":  f.id[0] + "\n" + broken + "\n",
		"plugin":    "AGE-PLUGIN-YUBIKEY-1QQQ" + broken[16:] + "\n",
		"ssh":       "-----BEGIN OPENSSH PRIVATE KEY-----\n" + broken[16:] + "\n",
		"empty":     "# nothing\n\n",
		"recipient": f.rcpt[0] + "\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := sops.ParseIdentities([]byte(data))
			if err == nil {
				t.Fatal("parsed")
			}
			f.quiet(t, err)
			if name == "recipient" && strings.Contains(err.Error(), f.rcpt[0]) {
				t.Errorf("the error quotes the line: %v", err)
			}
		})
	}
}

// roundTrip is a plaintext file, how sops encrypts it, and what Values
// must hold.
type roundTrip struct {
	name   string
	file   string
	plain  string
	args   []string // besides --age (unless they hold --config with keys)
	values []string
}

func roundTrips(t *testing.T, f *fixture) []roundTrip {
	a, b, c, d, e := f.secret(t), f.secret(t), f.secret(t), f.secret(t), f.secret(t)
	fill := strings.NewReplacer("{a}", a, "{b}", b, "{c}", c, "{d}", d, "{e}", e).Replace
	secret := fill(`# a Secret
apiVersion: v1
kind: Secret
metadata:
  name: app
  labels: {tier: backend}
type: Opaque
stringData:
  password: {a}
  multi: |
    {b}
    second line
data:
  token: {c}
`)
	return []roundTrip{{
		name: "yaml every type",
		file: "all.yaml",
		plain: fill(`# a comment
top: {a}
nested:
  count: 42
  negative: -7
  ratio: 2.5
  big: 1e3
  enabled: true
  off: false
  quoted: "true"
  number_string: "12"
  empty: ""
  none: null
  when: 2001-12-14
  multi: |
    {b}
    second line
  folded: >-
    one
    two
  list:
    - {c}
    # a comment in a list
    - 7
    - nested: {d}
      deeper: [1, false]
note_unencrypted: {e}
`),
		values: []string{a, "42", "-7", "2.5", "1000", "true", "false", "true", "12", "2001-12-14T00:00:00Z",
			b + "\nsecond line\n", "one two", c, "7", d, "1", "false"},
	}, {
		name:   "yaml multi-document",
		file:   "multi.yaml",
		plain:  fill("first: {a}\n---\n# only a comment before\nsecond:\n  - {b}\n  - 3\n---\nthird_unencrypted: {e}\nfourth: {c}\n"),
		values: []string{a, b, "3", c},
	}, {
		name:   "yaml encrypted_regex",
		file:   "secret.yaml",
		plain:  secret,
		args:   []string{"--encrypted-regex", "^(data|stringData)$"},
		values: []string{a, b + "\nsecond line\n", c},
	}, {
		name:   "yaml unencrypted_regex",
		file:   "secret.yaml",
		plain:  secret,
		args:   []string{"--unencrypted-regex", "^(apiVersion|kind|metadata|type)$"},
		values: []string{a, b + "\nsecond line\n", c},
	}, {
		name:   "yaml encrypted_suffix",
		file:   "suffix.yaml",
		plain:  fill("password_secret: {a}\nnested_secret:\n  x: {b}\n  y: [{c}, 5]\nplain: {e}\nother: {x: {d}}\n"),
		args:   []string{"--encrypted-suffix", "_secret"},
		values: []string{a, b, c, "5"},
	}, {
		name:   "yaml unencrypted_suffix",
		file:   "suffix.yaml",
		plain:  fill("password: {a}\nname_plain: {e}\ntree_plain:\n  inner: {d}\nlist: [{b}]\n"),
		args:   []string{"--unencrypted-suffix", "_plain"},
		values: []string{a, b},
	}, {
		name:   "yaml mac_only_encrypted",
		file:   "maconly.yaml",
		plain:  fill("data:\n  a: {a}\n  n: 1\nplain: {e}\nalso: [{d}, 2]\n"),
		args:   f.s.Rule("mac_only_encrypted: true", "encrypted_regex: ^data$"),
		values: []string{a, "1"},
	}, {
		name:   "yaml encrypted_comment_regex",
		file:   "comments.yaml",
		plain:  fill("a: {e}\n# sops:enc\nb: {a}\nlist:\n  # sops:enc\n  - {b}\n  - {d}\nc: 1\n"),
		args:   f.s.Rule("encrypted_comment_regex: sops:enc"),
		values: []string{a, b},
	}, {
		name:   "yaml unencrypted_comment_regex",
		file:   "comments.yaml",
		plain:  fill("a: {a}\n# sops:plain\nb: {e}\nlist:\n  - {b}\n  # sops:plain\n  - {d}\n  # another comment\n  - {c}\n"),
		args:   f.s.Rule("unencrypted_comment_regex: sops:plain"),
		values: []string{a, b, c},
	}, {
		name:   "json",
		file:   "config.json",
		plain:  fill(`{"z": "{a}", "a": {"list": [1, 2.50, true, "{b}", null, {"k": "{c}"}], "empty": ""}, "big": 12345678901234, "x_unencrypted": "{e}"}`),
		values: []string{a, "1", "2.5", "true", b, c, "12345678901234"},
	}, {
		name:   "json encrypted_regex",
		file:   "config.json",
		plain:  fill(`{"data": {"token": "{a}"}, "meta": {"name": "{e}"}}`),
		args:   []string{"--encrypted-regex", "^data$"},
		values: []string{a},
	}, {
		name:   "dotenv",
		file:   "app.env",
		plain:  fill("# a comment\nPASSWORD={a}\nMULTI={b}\\nline two\nNOTE_unencrypted={e}\nEMPTY=\nSPACES=  {c} x \n"),
		values: []string{a, b + "\nline two", "  " + c + " x "},
	}, {
		name:   "binary",
		file:   "key.bin",
		plain:  "\x00\xff\xfe" + a + "\n\r\n" + b,
		values: []string{"\x00\xff\xfe" + a + "\n\r\n" + b},
	}}
}

// TestRoundTrip encrypts files with the sops CLI and decrypts them: the
// plaintext is the original (as data: types kept, comments dropped), as
// sops's own decryption is, Values are exactly the encrypted values, and
// the encrypted file is Encrypted while the original is not.
func TestRoundTrip(t *testing.T) {
	f := newFixture(t)
	ids := f.ids(t, f.id[0])
	keys := f.s.KeysFile(f.id[0])
	for _, rt := range roundTrips(t, f) {
		t.Run(rt.name, func(t *testing.T) {
			format := sops.FormatOf(rt.file)
			enc := f.s.Encrypt(rt.file, []byte(rt.plain), append([]string{"--age", f.rcpt[0]}, rt.args...)...)
			for _, v := range rt.values {
				if len(v) > 8 && bytes.Contains(enc, []byte(v)) {
					t.Fatalf("sops left %q in the clear:\n%s", v, enc)
				}
			}
			if !sops.Encrypted(format, enc) {
				t.Errorf("Encrypted(%v) = false for sops's output:\n%s", format, enc)
			}
			if sops.Encrypted(format, []byte(rt.plain)) {
				t.Errorf("Encrypted(%v) = true for the plaintext", format)
			}
			res, err := sops.Decrypt(format, enc, ids)
			if err != nil {
				t.Fatalf("Decrypt: %v\n%s", err, enc)
			}
			if !slices.Equal(res.Values, rt.values) {
				t.Errorf("Values:\n got %q\nwant %q", res.Values, rt.values)
			}
			if diff := sameData(format, res.Plain, []byte(rt.plain)); diff != "" {
				t.Errorf("plaintext differs from the original: %s\ngot:\n%s\nwant:\n%s", diff, res.Plain, rt.plain)
			}
			theirs, err := f.s.Decrypt(rt.file, enc, keys)
			if err != nil {
				t.Fatal(err)
			}
			if diff := sameData(format, res.Plain, theirs); diff != "" {
				t.Errorf("plaintext differs from sops decrypt's: %s\ngot:\n%s\nsops:\n%s", diff, res.Plain, theirs)
			}
		})
	}
}

// TestDecryptedTypes checks how decrypted values are written: a string
// always reads back as a string, in YAML 1.1 too (yes, 12, true).
func TestDecryptedTypes(t *testing.T) {
	f := newFixture(t)
	plain := "a: \"true\"\nb: \"yes\"\nc: \"12\"\nd: 12\ne: 1.0\nf: true\ng: \"1e3\"\nh: ~\n"
	enc := f.s.Encrypt("t.yaml", []byte(plain), "--age", f.rcpt[0])
	res, err := sops.Decrypt(sops.YAML, enc, f.ids(t, f.id[0]))
	if err != nil {
		t.Fatal(err)
	}
	want := "a: \"true\"\nb: \"yes\"\nc: \"12\"\nd: 12\ne: 1.0\nf: true\ng: \"1e3\"\nh: null\n"
	if string(res.Plain) != want {
		t.Errorf("got:\n%s\nwant:\n%s", res.Plain, want)
	}
}

func TestEncrypted(t *testing.T) {
	f := newFixture(t)
	ini := f.s.Encrypt("app.ini", []byte("[section]\nkey = value\n"), "--age", f.rcpt[0])
	if !sops.Encrypted(sops.INI, ini) {
		t.Errorf("an encrypted INI file is not Encrypted:\n%s", ini)
	}
	_, err := sops.Decrypt(sops.INI, ini, f.ids(t, f.id[0]))
	if se := f.wantError(t, err, sops.ReasonInvalid); se != nil && !strings.Contains(err.Error(), "INI") {
		t.Errorf("the error does not say INI is not supported: %v", err)
	}
	for name, c := range map[string]struct {
		f    sops.Format
		data string
	}{
		"yaml not parsing":     {sops.YAML, "a: [\nsops: {mac: x, lastmodified: y}\n"},
		"yaml sops not a map":  {sops.YAML, "sops: yes\n"},
		"yaml no mac":          {sops.YAML, "sops: {lastmodified: x}\n"},
		"yaml nested sops":     {sops.YAML, "a:\n  sops: {mac: x, lastmodified: y}\n"},
		"json no sops":         {sops.JSON, `{"a": 1}`},
		"json not an object":   {sops.JSON, `[{"sops": {"mac": 1, "lastmodified": 2}}]`},
		"binary without data":  {sops.Binary, `{"sops": {"mac": "x", "lastmodified": "y"}}`},
		"binary not json":      {sops.Binary, "\x89PNG\r\n"},
		"dotenv without mac":   {sops.Dotenv, "A=1\nsops_version=3\n"},
		"dotenv mac elsewhere": {sops.Dotenv, "A=sops_mac=1\n"},
		"ini no sops section":  {sops.INI, "[a]\nmac = 1\n"},
		"empty":                {sops.YAML, ""},
	} {
		if sops.Encrypted(c.f, []byte(c.data)) {
			t.Errorf("%s: Encrypted", name)
		}
	}
	// A later document with metadata makes the file encrypted, so that
	// it is not read as plain; Decrypt then wants it in the first, as sops.
	second := "a: 1\n---\nb: 2\nsops:\n  mac: x\n  lastmodified: y\n"
	if !sops.Encrypted(sops.YAML, []byte(second)) {
		t.Error("metadata in a later document is not Encrypted")
	}
	_, err = sops.Decrypt(sops.YAML, []byte(second), nil)
	f.wantError(t, err, sops.ReasonInvalid)
}

// sameData compares two files of a format as data: YAML and JSON decoded
// (all numbers as float64), dotenv as its KEY=value set, binary as bytes.
// It returns "" when they are the same.
func sameData(f sops.Format, got, want []byte) string {
	var g, w any
	var err error
	switch f {
	case sops.YAML:
		if g, err = yamlData(got); err == nil {
			w, err = yamlData(want)
		}
	case sops.JSON:
		if err = json.Unmarshal(got, &g); err == nil {
			err = json.Unmarshal(want, &w)
		}
	case sops.Dotenv:
		g, w = dotenvData(got), dotenvData(want)
	default:
		g, w = string(got), string(want)
	}
	if err != nil {
		return err.Error()
	}
	g, w = numbers(g), numbers(w)
	if !reflect.DeepEqual(g, w) {
		return "got " + jsonText(g) + ", want " + jsonText(w)
	}
	return ""
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

func yamlData(data []byte) (any, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []any
	for {
		var d any
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if d == nil {
			d = map[string]any{} // sops writes an empty document as {}
		}
		docs = append(docs, d)
	}
}

func dotenvData(data []byte) map[string]string {
	m := map[string]string{}
	for line := range strings.SplitSeq(string(data), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			m[k] = v
		}
	}
	return m
}

// numbers makes every number a float64, times strings, so that YAML's
// int/float choices and JSON's float64 compare by value.
func numbers(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			v[k] = numbers(x)
		}
	case []any:
		for i, x := range v {
			v[i] = numbers(x)
		}
	case int:
		return float64(v)
	case time.Time:
		return v.UTC().Format(time.RFC3339Nano)
	}
	return v
}

// TestEmptyDocument: a document that holds nothing but sops's metadata
// (sops writes it into an empty one) comes out empty, not as {}.
func TestEmptyDocument(t *testing.T) {
	f := newFixture(t)
	a := f.secret(t)
	enc := f.s.Encrypt("e.yaml", []byte("a: "+a+"\n---\n# nothing\n---\nb: 1\n"), "--age", f.rcpt[0])
	if n := bytes.Count(enc, []byte("\nsops:")) + bytes.Count(enc[:5], []byte("sops:")); n != 3 {
		t.Fatalf("sops wrote its metadata %d times, want 3:\n%s", n, enc)
	}
	res, err := sops.Decrypt(sops.YAML, enc, f.ids(t, f.id[0]))
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(res.Plain))
	var docs []any
	for {
		var d any
		if err := dec.Decode(&d); err != nil {
			break
		}
		docs = append(docs, d)
	}
	want := []any{map[string]any{"a": a}, nil, map[string]any{"b": 1}}
	if !reflect.DeepEqual(docs, want) {
		t.Errorf("documents %#v, want %#v:\n%s", docs, want, res.Plain)
	}
}
