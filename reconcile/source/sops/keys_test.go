package sops_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"filippo.io/age"
	"filippo.io/age/armor"
	yaml "go.yaml.in/yaml/v3"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/reconcile/source/sops"
)

// TestRecipients decrypts files sops encrypted for several keys, in one
// group and in Shamir key groups, with each set of identities: those that
// must open the file do, the others fail with reason auth naming the
// recipients that could have opened it.
func TestRecipients(t *testing.T) {
	f := newFixture(t)
	pqID, pqRcpt := f.s.KeygenPQ()
	lostID, lost := f.s.Keygen() // a key nobody holds
	f.secretText = append(f.secretText, pqID, lostID)
	r := f.rcpt
	for _, c := range []struct {
		name  string
		args  []string
		opens [][]string // sets of identities that open it
		fails [][]string // sets that do not
		// named are the recipients a failure names (all of them when nil).
		named [][]string
	}{{
		name:  "two recipients",
		args:  []string{"--age", r[0] + "," + r[1]},
		opens: [][]string{{f.id[0]}, {f.id[1]}, {f.id[2], f.id[1]}},
		fails: [][]string{{f.id[2]}, {}},
		named: [][]string{{r[0], r[1]}, {r[0], r[1]}},
	}, {
		name:  "two groups, both needed",
		args:  f.s.Rule(testenv.KeyGroups(0, []string{r[0]}, []string{r[1]})),
		opens: [][]string{{f.id[0], f.id[1]}, {f.id[1], f.id[0], f.id[2]}},
		fails: [][]string{{f.id[0]}, {f.id[1]}, {f.id[2]}},
		named: [][]string{{r[1]}, {r[0]}, {r[0], r[1]}},
	}, {
		name:  "three groups, threshold two",
		args:  f.s.Rule(testenv.KeyGroups(2, []string{r[0]}, []string{r[1], lost}, []string{r[2]})),
		opens: [][]string{{f.id[0], f.id[1]}, {f.id[0], f.id[2]}, {f.id[2], f.id[1]}, {f.id[0], f.id[1], f.id[2]}},
		fails: [][]string{{f.id[0]}, {f.id[2]}},
		named: [][]string{{r[1], lost, r[2]}, {r[0], r[1], lost}},
	}, {
		name:  "post-quantum recipient",
		args:  []string{"--age", pqRcpt + "," + r[0]},
		opens: [][]string{{pqID}, {f.id[0]}},
		fails: [][]string{{f.id[1]}},
		named: [][]string{{pqRcpt, r[0]}},
	}} {
		t.Run(c.name, func(t *testing.T) {
			a, b := f.secret(t), f.secret(t)
			plain := "a: " + a + "\nb:\n  - " + b + "\n"
			enc := f.s.Encrypt("s.yaml", []byte(plain), c.args...)
			for _, idset := range c.opens {
				res, err := sops.Decrypt(sops.YAML, enc, f.ids(t, idset...))
				if err != nil {
					t.Errorf("%d identities: %v", len(idset), err)
					continue
				}
				if !slices.Equal(res.Values, []string{a, b}) {
					t.Errorf("Values %q", res.Values)
				}
			}
			for i, idset := range c.fails {
				var ids []age.Identity
				if len(idset) > 0 {
					ids = f.ids(t, idset...)
				}
				_, err := sops.Decrypt(sops.YAML, enc, ids)
				se := f.wantError(t, err, sops.ReasonAuth)
				if !slices.Equal(se.Recipients, c.named[i]) {
					t.Errorf("Recipients %q, want %q", se.Recipients, c.named[i])
				}
				for _, rc := range c.named[i] {
					if !strings.Contains(err.Error(), rc[:min(len(rc), 40)]) {
						t.Errorf("the error does not name %s: %v", rc, err)
					}
				}
			}
		})
	}
}

// A PGP fingerprint and a KMS key, as sops writes them next to age keys.
const (
	pgpFP  = "85D77543B3D624B63CEA9E6DBC17301B491B3F21"
	kmsARN = "arn:aws:kms:us-east-1:656532927350:key/920aff2e-c5f1-4040-943a-047fa387b27e"
)

// addOtherKeys adds a PGP and a KMS master key to every group of the
// metadata of every document (the key list is not covered by the MAC: sops
// itself decrypts the result with the age key), removing the age entries
// when dropAge.
func addOtherKeys(t *testing.T, enc []byte, dropAge bool) []byte {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(enc))
	var out bytes.Buffer
	e := yaml.NewEncoder(&out)
	e.SetIndent(4)
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); err != nil {
			break
		}
		md := mapValue(doc.Content[0], "sops")
		groups := []*yaml.Node{md}
		if kg := mapValue(md, "key_groups"); kg != nil {
			groups = kg.Content
		}
		for _, g := range groups {
			var extra yaml.Node
			if err := yaml.Unmarshal([]byte(`
kms:
  - arn: `+kmsARN+`
    created_at: "2024-01-01T00:00:00Z"
    enc: AQICAHhVtHhPl8GHdFm4n7Cx2j/9TH3Ez+dOl/9eaJTKh3FL1gHsO1yhzqP3KQvHh4ZzAAAAfjB8BgkqhkiG9w0BBwagbzBtAgEAMGgGCSqGSIb3DQEHATAeBglghkgBZQMEAS4wEQQM
    aws_profile: ""
pgp:
  - created_at: "2024-01-01T00:00:00Z"
    enc: |
      -----BEGIN PGP MESSAGE-----

      hQIMA0t4uZHfl9qgAQ//UvGAwGePyHuf2/zayWcloGaDs0MzI+zw6CmXvMRNPUsA
      =Zr3C
      -----END PGP MESSAGE-----
    fp: `+pgpFP+`
`), &extra); err != nil {
				t.Fatal(err)
			}
			if dropAge {
				for i := 0; i < len(g.Content); i += 2 {
					if g.Content[i].Value == "age" {
						g.Content = append(g.Content[:i], g.Content[i+2:]...)
						break
					}
				}
			}
			g.Content = append(g.Content, extra.Content[0].Content...)
		}
		if err := e.Encode(&doc); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// mapValue is the value of key in mapping m, nil when absent.
func mapValue(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// TestOtherKeyTypes: PGP and KMS entries next to the age one are never
// used; the file opens with the age key, and when no age entry opens it
// the error names them, as well as the age recipients.
func TestOtherKeyTypes(t *testing.T) {
	f := newFixture(t)
	keys := f.s.KeysFile(f.id[0])
	for _, c := range []struct {
		name  string
		args  []string
		named []string
	}{
		{"one group", []string{"--age", f.rcpt[0]}, []string{f.rcpt[0], "pgp " + pgpFP, "kms " + kmsARN}},
		{"key groups", f.s.Rule(testenv.KeyGroups(2, []string{f.rcpt[0]}, []string{f.rcpt[1]})),
			[]string{f.rcpt[0], "pgp " + pgpFP, "kms " + kmsARN, f.rcpt[1], "pgp " + pgpFP, "kms " + kmsARN}},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := f.secret(t)
			enc := f.s.Encrypt("s.yaml", []byte("a: "+a+"\n"), c.args...)
			mixed := addOtherKeys(t, enc, false)
			if !bytes.Contains(mixed, []byte(pgpFP)) || !bytes.Contains(mixed, []byte(kmsARN)) {
				t.Fatalf("the keys were not added:\n%s", mixed)
			}
			ids := f.ids(t, f.id[0], f.id[1])
			if c.name == "one group" {
				ids = f.ids(t, f.id[0])
				// sops itself opens it with the age key: the file is real.
				if _, err := f.s.Decrypt("s.yaml", mixed, keys); err != nil {
					t.Fatalf("sops does not decrypt the file with PGP and KMS entries added: %v", err)
				}
			}
			res, err := sops.Decrypt(sops.YAML, mixed, ids)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res.Values, []string{a}) {
				t.Errorf("Values %q", res.Values)
			}

			_, err = sops.Decrypt(sops.YAML, mixed, f.ids(t, f.id[2]))
			se := f.wantError(t, err, sops.ReasonAuth)
			if !slices.Equal(se.Recipients, c.named) {
				t.Errorf("Recipients %q, want %q", se.Recipients, c.named)
			}
			for _, want := range []string{pgpFP, kmsARN, "never contacted"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error does not say %q: %v", want, err)
				}
			}

			_, err = sops.Decrypt(sops.YAML, addOtherKeys(t, enc, true), ids)
			se = f.wantError(t, err, sops.ReasonAuth)
			if slices.Contains(se.Recipients, f.rcpt[0]) || !slices.Contains(se.Recipients, "pgp "+pgpFP) {
				t.Errorf("without age entries, Recipients %q", se.Recipients)
			}
		})
	}
}

// TestIdentityTypes: only X25519 and post-quantum identities are used; a
// passphrase identity is refused, and an age entry encrypted with a
// passphrase does not open with the others.
func TestIdentityTypes(t *testing.T) {
	f := newFixture(t)
	enc := f.s.Encrypt("s.yaml", []byte("a: "+f.secret(t)+"\n"), "--age", f.rcpt[0])
	scrypt, err := age.NewScryptIdentity("a passphrase")
	if err != nil {
		t.Fatal(err)
	}
	_, err = sops.Decrypt(sops.YAML, enc, append(f.ids(t, f.id[0]), scrypt))
	f.wantError(t, err, sops.ReasonAuth)

	// Replace the age entry with one a passphrase protects.
	rcpt, err := age.NewScryptRecipient("a passphrase")
	if err != nil {
		t.Fatal(err)
	}
	rcpt.SetWorkFactor(10)
	var armored bytes.Buffer
	aw := armor.NewWriter(&armored)
	w, err := age.Encrypt(aw, rcpt)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write(bytes.Repeat([]byte{7}, 32))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := aw.Close(); err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(enc, &doc); err != nil {
		t.Fatal(err)
	}
	entry := mapValue(mapValue(doc.Content[0], "sops"), "age").Content[0]
	mapValue(entry, "enc").Value = armored.String()
	withScrypt, err := yaml.Marshal(&doc)
	if err != nil {
		t.Fatal(err)
	}
	_, err = sops.Decrypt(sops.YAML, withScrypt, f.ids(t, f.id[0], f.id[1]))
	f.wantError(t, err, sops.ReasonAuth)
}
