package sops_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	"filippo.io/age/armor"
	yaml "go.yaml.in/yaml/v3"

	"recond.dev/recond/reconcile/source/sops"
)

// encValue matches an encrypted value; group 1 is its data.
var encValue = regexp.MustCompile(`ENC\[AES256_GCM,data:([A-Za-z0-9+/=]+),iv:[^\]]*\]`)

// flipData changes one byte of the ciphertext of the value on the line
// that starts with prefix (after its indentation).
func flipData(t *testing.T, file, prefix string) string {
	t.Helper()
	return editLine(t, file, prefix, func(line string) string {
		m := encValue.FindStringSubmatchIndex(line)
		if m == nil {
			t.Fatalf("no encrypted value on %q", line)
		}
		data, err := base64.StdEncoding.DecodeString(line[m[2]:m[3]])
		if err != nil {
			t.Fatal(err)
		}
		data[0] ^= 1
		return line[:m[2]] + base64.StdEncoding.EncodeToString(data) + line[m[3]:]
	})
}

// editLine replaces the one line that starts with prefix (after its
// indentation).
func editLine(t *testing.T, file, prefix string, edit func(string) string) string {
	t.Helper()
	lines := strings.Split(file, "\n")
	n := 0
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimLeft(l, " \t"), prefix) {
			lines[i] = edit(l)
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d lines start with %q, want 1:\n%s", n, prefix, file)
	}
	return strings.Join(lines, "\n")
}

// encOf is the encrypted value on the line that starts with prefix.
func encOf(t *testing.T, file, prefix string) string {
	t.Helper()
	var v string
	editLine(t, file, prefix, func(l string) string { v = encValue.FindString(l); return l })
	return v
}

// TestTamper changes a file sops encrypted, in each way an attacker with
// write access to the repository (but no key) could, and checks that
// every change is refused with reason invalid, quoting nothing secret,
// as sops itself refuses it.
func TestTamper(t *testing.T) {
	f := newFixture(t)
	ids := f.ids(t, f.id[0])
	keys := f.s.KeysFile(f.id[0])
	pw, token, first, second := f.secret(t), f.secret(t), f.secret(t), f.secret(t)
	secret := string(f.s.Encrypt("secret.yaml", []byte(fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata:
  name: app
stringData:
  password: %s
  list:
    - %s
    - %s
data:
  token: %s
`, pw, first, second, token)), "--age", f.rcpt[0], "--encrypted-regex", "^(data|stringData)$"))
	mac := string(f.s.Encrypt("mac.yaml", []byte("data:\n  a: "+pw+"\nplain: x\n"), append(f.s.Rule("mac_only_encrypted: true", "encrypted_regex: ^data$"), "--age", f.rcpt[0])...))
	js := string(f.s.Encrypt("s.json", []byte(fmt.Sprintf(`{"a": %q, "b": %q}`, pw, token)), "--age", f.rcpt[0]))
	env := string(f.s.Encrypt("s.env", []byte("A="+pw+"\nB="+token+"\n"), "--age", f.rcpt[0]))
	bin := string(f.s.Encrypt("s.bin", []byte(pw), "--age", f.rcpt[0]))

	for _, c := range []struct {
		name, file string
		src        string
		edit       func(*testing.T, string) string
		sopsAlso   bool // sops refuses it too (it does not check that the rule's plain values are plain)
	}{
		{"ciphertext byte", "s.yaml", secret, func(t *testing.T, s string) string { return flipData(t, s, "token:") }, true},
		{"list element byte", "s.yaml", secret, func(t *testing.T, s string) string {
			m := encValue.FindStringSubmatch(s[strings.Index(s, "list:"):])
			data, err := base64.StdEncoding.DecodeString(m[1])
			if err != nil {
				t.Fatal(err)
			}
			data[len(data)-1] ^= 0x80
			return strings.Replace(s, m[1], base64.StdEncoding.EncodeToString(data), 1)
		}, true},
		{"value moved to another key", "s.yaml", secret, func(t *testing.T, s string) string {
			p, tk := encOf(t, s, "password:"), encOf(t, s, "token:")
			s = editLine(t, s, "password:", func(l string) string { return strings.Replace(l, p, tk, 1) })
			return editLine(t, s, "token:", func(l string) string { return strings.Replace(l, tk, p, 1) })
		}, true},
		{"list elements swapped", "s.yaml", secret, func(t *testing.T, s string) string {
			m := encValue.FindAllString(s[strings.Index(s, "list:"):], 2)
			return strings.Replace(strings.Replace(strings.Replace(s, m[0], "@@", 1), m[1], m[0], 1), "@@", m[1], 1)
		}, true},
		{"MAC changed", "s.yaml", secret, func(t *testing.T, s string) string { return flipData(t, s, "mac:") }, true},
		{"lastmodified changed", "s.yaml", secret, func(t *testing.T, s string) string { // sops re-formats it in RFC 3339: only a different time is a change
			return editLine(t, s, "lastmodified:", func(l string) string {
				v := strings.Trim(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "lastmodified:")), `"`)
				tm, err := time.Parse(time.RFC3339, v)
				if err != nil {
					t.Fatal(err)
				}
				return strings.Replace(l, v, tm.Add(time.Second).Format(time.RFC3339), 1)
			})
		}, true},
		{"encrypted value replaced by its plaintext", "s.yaml", secret, func(t *testing.T, s string) string {
			return editLine(t, s, "token:", func(l string) string { return "    token: " + token })
		}, true},
		{"plaintext added where the rule encrypts", "s.yaml", secret, func(t *testing.T, s string) string {
			return strings.Replace(s, "data:\n", "data:\n    extra: "+f.secret(t)+"\n", 1)
		}, true},
		{"plaintext value changed", "s.yaml", secret, func(t *testing.T, s string) string {
			return editLine(t, s, "name: app", func(l string) string { return strings.Replace(l, "app", "other", 1) })
		}, true},
		{"plain keys reordered", "s.yaml", secret, func(t *testing.T, s string) string {
			return strings.Replace(s, "apiVersion: v1\nkind: Secret\n", "kind: Secret\napiVersion: v1\n", 1)
		}, true},
		{"value removed", "s.yaml", secret, func(t *testing.T, s string) string {
			return editLine(t, s, "token:", func(string) string { return "    other: \"\"" })
		}, true},
		{"rule narrowed", "s.yaml", secret, func(t *testing.T, s string) string {
			return strings.Replace(s, "encrypted_regex: ^(data|stringData)$", "encrypted_regex: ^(stringData)$", 1)
		}, true},
		{"rule removed", "s.yaml", secret, func(t *testing.T, s string) string {
			return editLine(t, s, "encrypted_regex:", func(string) string { return "" })
		}, true},
		{"rule swapped", "s.yaml", secret, func(t *testing.T, s string) string {
			return strings.Replace(s, "encrypted_regex: ^(data|stringData)$", "unencrypted_regex: ^(data|stringData)$", 1)
		}, true},
		{"mac_only_encrypted added", "s.yaml", secret, func(t *testing.T, s string) string {
			return strings.Replace(s, "sops:\n", "sops:\n    mac_only_encrypted: true\n", 1)
		}, true},
		{"mac_only_encrypted removed", "m.yaml", mac, func(t *testing.T, s string) string {
			return editLine(t, s, "mac_only_encrypted:", func(string) string { return "" })
		}, true},
		{"mac_only_encrypted: encrypted value changed", "m.yaml", mac, func(t *testing.T, s string) string { return flipData(t, s, "a: ENC") }, true},
		{"encrypted value copied to a plain key, mac_only_encrypted", "m.yaml", mac, func(t *testing.T, s string) string {
			return editLine(t, s, "plain: x", func(string) string { return "plain: " + encOf(t, s, "a: ENC") })
		}, false},
		{"json value moved", "s.json", js, func(t *testing.T, s string) string {
			a, b := encOf(t, s, `"a":`), encOf(t, s, `"b":`)
			return strings.Replace(strings.Replace(strings.Replace(s, a, "@@", 1), b, a, 1), "@@", b, 1)
		}, true},
		{"dotenv ciphertext byte", "s.env", env, func(t *testing.T, s string) string { return flipData(t, s, "B=") }, true},
		{"dotenv lastmodified", "s.env", env, func(t *testing.T, s string) string {
			return editLine(t, s, "sops_lastmodified=", func(l string) string {
				tm, err := time.Parse(time.RFC3339, strings.TrimPrefix(l, "sops_lastmodified="))
				if err != nil {
					t.Fatal(err)
				}
				return "sops_lastmodified=" + tm.Add(-time.Hour).Format(time.RFC3339)
			})
		}, true},
		{"binary ciphertext byte", "s.bin", bin, func(t *testing.T, s string) string { return flipData(t, s, `"data":`) }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			changed := c.edit(t, c.src)
			if changed == c.src {
				t.Fatal("the edit changed nothing")
			}
			format := sops.FormatOf(c.file)
			if _, err := sops.Decrypt(format, []byte(c.src), ids); err != nil {
				t.Fatalf("the file before the change: %v", err)
			}
			_, err := sops.Decrypt(format, []byte(changed), ids)
			f.wantError(t, err, sops.ReasonInvalid)
			t.Log(err)
			if _, err := f.s.Decrypt(c.file, []byte(changed), keys); (err != nil) != c.sopsAlso {
				t.Errorf("sops decrypt: %v, want it to fail: %v\n%s", err, c.sopsAlso, changed)
			}
		})
	}
}

// TestRefused: what sops never writes, and what would make decryption
// costly, is refused with reason invalid (and quickly).
func TestRefused(t *testing.T) {
	f := newFixture(t)
	ids := f.ids(t, f.id[0])
	enc := string(f.s.Encrypt("s.yaml", []byte("a: "+f.secret(t)+"\nb_unencrypted: plain\n"), "--age", f.rcpt[0]))
	var laughs strings.Builder
	laughs.WriteString("l0_unencrypted: &l0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 10; i++ {
		fmt.Fprintf(&laughs, "l%d_unencrypted: &l%d [*l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d]\n", i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	deep := strings.Repeat("{a: ", 300) + "x" + strings.Repeat("}", 300)

	// 65 age entries; 17 key groups; an age entry with 9 stanzas.
	entries := editMetadata(t, enc, func(md *yaml.Node) {
		l := mapValue(md, "age")
		for len(l.Content) < 65 {
			l.Content = append(l.Content, l.Content[0])
		}
	})
	groups := editMetadata(t, enc, func(md *yaml.Node) {
		l := mapValue(md, "age")
		g := &yaml.Node{Kind: yaml.SequenceNode}
		for range 17 {
			g.Content = append(g.Content, &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{{Kind: yaml.ScalarNode, Value: "age"}, l}})
		}
		for i := 0; i < len(md.Content); i += 2 {
			if md.Content[i].Value == "age" {
				md.Content[i].Value, md.Content[i+1] = "key_groups", g
			}
		}
	})
	stanzas := editMetadata(t, enc, func(md *yaml.Node) {
		var rs []age.Recipient
		for range 9 {
			id, err := age.GenerateX25519Identity()
			if err != nil {
				t.Fatal(err)
			}
			rs = append(rs, id.Recipient())
		}
		var b bytes.Buffer
		aw := armor.NewWriter(&b)
		w, err := age.Encrypt(aw, rs...)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write(make([]byte, 32))
		_ = w.Close()
		_ = aw.Close()
		mapValue(mapValue(md, "age").Content[0], "enc").Value = b.String()
	})

	for _, c := range []struct {
		name, file, data, want string
	}{
		{"alias", "s.yaml", enc + "x_unencrypted: &x {k: v}\ny_unencrypted: *x\n", "alias"},
		{"billion laughs", "s.yaml", enc + laughs.String(), "alias"},
		{"merge key", "s.yaml", enc + "z_unencrypted:\n  <<: {k: v}\n", "merge"},
		{"duplicate key", "s.yaml", enc + "b_unencrypted: again\n", "twice"},
		{"deep nesting", "s.yaml", enc + "deep_unencrypted: " + deep + "\n", "deep"},
		{"a list as a document", "s.yaml", enc + "---\n- a\n", "list"},
		{"no metadata", "s.yaml", "a: 1\n", "metadata"},
		{"metadata only in a later document", "s.yaml", "a: 1\n---\n" + enc, "first document"},
		{"two rules", "s.yaml", strings.Replace(enc, "sops:\n", "sops:\n    encrypted_regex: ^a$\n", 1), "more than one rule"},
		{"invalid regex", "s.yaml", strings.Replace(strings.Replace(enc, "    unencrypted_suffix: _unencrypted\n", "", 1), "sops:\n", "sops:\n    encrypted_regex: '^(a$'\n", 1), "regular expression"},
		{"65 master keys", "s.yaml", entries, "master keys"},
		{"17 key groups", "s.yaml", groups, "key groups"},
		{"9 stanzas", "s.yaml", stanzas, "stanzas"},
		{"json duplicate key", "s.json", `{"a": 1, "a": 2, "sops": {}}`, "twice"},
		{"json trailing data", "s.json", `{"a": 1} {}`, "follows"},
		{"binary with another key", "s.bin", `{"data": "x", "other": 1, "sops": {"mac": "x", "lastmodified": "2024-01-01T00:00:00Z"}}`, "binary"},
		{"dotenv without metadata", "s.env", "A=1\n", "metadata"},
		{"dotenv list index out of range", "s.env", "A=1\nsops_mac=x\nsops_age__list_99999999__map_enc=x\n", "index"},
	} {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			_, err := sops.Decrypt(sops.FormatOf(c.file), []byte(c.data), ids)
			f.wantError(t, err, sops.ReasonInvalid)
			if err != nil && !strings.Contains(err.Error(), c.want) {
				t.Errorf("the error does not say %q: %v", c.want, err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}

// editMetadata edits the sops mapping of a one-document YAML file.
func editMetadata(t *testing.T, file string, edit func(md *yaml.Node)) string {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(file), &doc); err != nil {
		t.Fatal(err)
	}
	edit(mapValue(doc.Content[0], "sops"))
	out, err := yaml.Marshal(&doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
