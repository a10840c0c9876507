package sops_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/reconcile/source/sops"
)

// FuzzDecrypt feeds any file, in any format, with any keys file, to
// ParseIdentities and Decrypt. The keys are part of the input, so that
// every fuzz worker opens the seeds: files the real sops encrypted (its
// fixture, testdata/sops/FuzzDecrypt) for the seed's keys, in each format,
// with Shamir groups and a post-quantum key.
// Neither panics; their errors never quote a key (nor Decrypt's the
// identities); Decrypt fails only with an *sops.Error, is deterministic,
// and what it opens is Encrypted.
func FuzzDecrypt(f *testing.F) {
	keysOf := func(ids ...string) []byte {
		return []byte("# created: 2024-01-01T00:00:00Z\n" + strings.Join(ids, "\n") + "\n")
	}
	f.Add(uint8(sops.YAML), []byte("a: 1\nsops:\n  mac: x\n  lastmodified: '2024-01-01T00:00:00Z'\n  age: [{recipient: age1x, enc: x}]\n"), []byte("# none\n"))
	f.Add(uint8(sops.Dotenv), []byte("A=1\nsops_mac=x\nsops_lastmodified=2024-01-01T00:00:00Z\nsops_age__list_0__map_enc=x\n"), []byte(""))
	f.Add(uint8(sops.JSON), []byte(`{"a": [1, 2.5, "x"], "sops": {"mac": "x", "lastmodified": "2024-01-01T00:00:00Z", "key_groups": [{"age": []}]}}`), []byte("AGE-SECRET-KEY-1\n"))
	s := testenv.NewSOPS(f)
	id1, r1 := s.Keygen()
	id2, r2 := s.Keygen()
	pq, rpq := s.KeygenPQ()
	plain := map[string]string{
		"a.yaml": "a: x1\nb:\n  c: [1, 2.5, true, \"t\"]\n  # comment\n  d: |\n    two\n    lines\n---\ne: y\n",
		"a.json": `{"a": {"b": [1, "x", null, false]}, "c_unencrypted": 3}`,
		"a.env":  "# c\nA=1\nB=two\\nlines\n",
		"a.bin":  "\x00binary\xff",
	}
	for name, p := range plain {
		f.Add(uint8(sops.FormatOf(name)), s.Encrypt(name, []byte(p), "--age", r1), keysOf(id1))
	}
	f.Add(uint8(sops.YAML), s.Encrypt("k.yaml", []byte(plain["a.yaml"]), s.Rule(testenv.KeyGroups(2, []string{r1}, []string{r2}, []string{rpq}), "mac_only_encrypted: true", "encrypted_regex: ^(a|c)$")...), keysOf(id2, pq))
	f.Add(uint8(sops.YAML), s.Encrypt("c.yaml", []byte("# sops:enc\na: 1\nb: [x, y]\n"), append(s.Rule("encrypted_comment_regex: sops:enc"), "--age", rpq)...), keysOf(pq))
	f.Fuzz(func(t *testing.T, format uint8, data, keys []byte) {
		form := sops.Format(format % 5)
		var lines []string // what may be a key
		for l := range strings.SplitSeq(string(keys), "\n") {
			if l = strings.TrimSpace(l); len(l) >= 20 {
				lines = append(lines, l)
			}
		}
		ids, err := sops.ParseIdentities(keys)
		if err != nil {
			for _, l := range lines {
				if strings.Contains(err.Error(), l) {
					t.Fatalf("ParseIdentities quotes a line: %v", err)
				}
			}
			ids = nil
		}
		encrypted := sops.Encrypted(form, data)
		res, err := sops.Decrypt(form, data, ids)
		res2, err2 := sops.Decrypt(form, data, ids)
		if (err == nil) != (err2 == nil) || err != nil && err.Error() != err2.Error() ||
			err == nil && (!bytes.Equal(res.Plain, res2.Plain) || strings.Join(res.Values, "\x00") != strings.Join(res2.Values, "\x00")) {
			t.Fatalf("not deterministic: %v / %v", err, err2)
		}
		if err != nil {
			var se *sops.Error
			if !errors.As(err, &se) || (se.Reason != sops.ReasonInvalid && se.Reason != sops.ReasonAuth) {
				t.Fatalf("not an *sops.Error with a reason: %v", err)
			}
			for _, l := range lines {
				if strings.HasPrefix(l, "AGE-SECRET-KEY-") && strings.Contains(err.Error(), l) {
					t.Fatalf("the error quotes an identity: %v", err)
				}
			}
			return
		}
		if !encrypted {
			t.Fatalf("Decrypt opened a file that is not Encrypted")
		}
	})
}
