package sops_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"recond.dev/recond/reconcile/source/sops"
)

// TestStripped: a file with part of what sops writes (its metadata
// removed, or without its mac or lastmodified) is refused, naming what is
// missing and never a value; a plain file, one with a value merely named
// sops, and a whole SOPS file are not.
func TestStripped(t *testing.T) {
	// A SOPS file as sops writes it (the demo's values file).
	whole, err := os.ReadFile("../../../examples/demo-sops/secrets-prod.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const enc = "ENC[AES256_GCM,data:4pGbFR3G2leSTdbYTyI/262Y,iv:FhBJowzRJe3fteQqQ7b6XCMCwRK4GdYP8WL2qFEsyhw=,tag:ogdjnX71xsgREjlX1+ePBg==,type:str]"
	if !strings.Contains(string(whole), enc) {
		t.Fatalf("the demo's values file no longer holds %s", enc)
	}
	// without drops the lines of whole that start with one of prefixes
	// (after indentation), and the lines indented below them.
	without := func(prefixes ...string) string {
		var out []string
		skipIndent := -1
		for _, l := range strings.Split(string(whole), "\n") {
			indent := len(l) - len(strings.TrimLeft(l, " -"))
			if skipIndent >= 0 && indent > skipIndent && strings.TrimSpace(l) != "" {
				continue
			}
			skipIndent = -1
			for _, p := range prefixes {
				if strings.HasPrefix(strings.TrimLeft(l, " "), p) {
					skipIndent = indent
				}
			}
			if skipIndent < 0 {
				out = append(out, l)
			}
		}
		return strings.Join(out, "\n")
	}
	secret := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: " + enc + "\n"
	for _, c := range []struct {
		name string
		f    sops.Format
		data string
		want string // in the error; "" for none
	}{
		{"whole", sops.YAML, string(whole), ""},
		{"plain", sops.YAML, "apiVersion: v1\nkind: ConfigMap\ndata:\n  a: b\n", ""},
		{"a value named sops", sops.YAML, "sops:\n  version: 3.9.0\n  image: sops:latest\nmac: aa:bb\n", ""},
		{"a text about the form", sops.YAML, "note: values look like ENC[AES256_GCM,…]\n", ""},
		{"sops block removed", sops.YAML, without("sops:"), "no sops metadata: its sops block was removed"},
		{"a Secret without its block", sops.YAML, secret, "no sops metadata"},
		{"a Secret's value cut short", sops.YAML, "stringData:\n  password: ENC[AES256_GCM,data:4pGb]\n", "no sops metadata"},
		{"mac removed", sops.YAML, without("mac:"), "the sops metadata has no mac,"},
		{"lastmodified removed", sops.YAML, without("lastmodified:"), "the sops metadata has no lastmodified"},
		{"both removed", sops.YAML, without("mac:", "lastmodified:"), "has no mac and no lastmodified"},
		{"both removed, no value encrypted", sops.YAML,
			"a: 1\nsops:\n  age:\n  - recipient: age1x\n    enc: |\n      -----BEGIN AGE ENCRYPTED FILE-----\n  version: 3.9.0\n",
			"has no mac and no lastmodified"},
		{"mac removed, a later document", sops.YAML, "a: 1\n---\nb: " + enc + "\nsops:\n  lastmodified: \"2026-12-02T13:05:15Z\"\n", "has no mac"},
		{"json mac removed", sops.JSON, `{"a": "` + enc + `", "sops": {"lastmodified": "2026-12-02T13:05:15Z", "age": [{"recipient": "age1x", "enc": "x"}]}}`, "has no mac"},
		{"json block removed", sops.JSON, `{"a": "` + enc + `"}`, "no sops metadata"},
		{"json key groups only", sops.JSON, `{"a": 1, "sops": {"key_groups": [{"age": [{"enc": "x"}]}]}}`, "has no mac and no lastmodified"},
		{"json a value named sops", sops.JSON, `{"sops": {"enabled": true, "encoding": "utf-8"}, "mac": "aa:bb"}`, ""},
		{"binary block removed", sops.Binary, `{"data": "` + enc + `"}`, "no sops metadata"},
		{"binary text", sops.Binary, "certificate ENC[AES256_GCM,data:abc,iv:def,tag:ghi,type:str]\n", "no sops metadata"},
		{"dotenv mac removed", sops.Dotenv, "PASSWORD=" + enc + "\nsops_lastmodified=2026-12-02T13:05:15Z\nsops_version=3.9.0\n", "has no mac"},
		{"dotenv block removed", sops.Dotenv, "PASSWORD=" + enc + "\n", "no sops metadata"},
		{"dotenv plain", sops.Dotenv, "A=1\nsops_version=3\n", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := sops.Stripped(c.f, []byte(c.data))
			if c.want == "" {
				if err != nil {
					t.Fatalf("Stripped: %v", err)
				}
				return
			}
			var se *sops.Error
			if !errors.As(err, &se) || se.Reason != sops.ReasonInvalid {
				t.Fatalf("Stripped = %v; want an *sops.Error with reason invalid", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("Stripped = %q; want it to say %q", err, c.want)
			}
			if strings.Contains(err.Error(), "4pGbFR3G2leSTdbYTyI") || strings.Contains(err.Error(), "age1x") {
				t.Errorf("the error quotes the file: %v", err)
			}
			if sops.Encrypted(c.f, []byte(c.data)) {
				t.Errorf("Encrypted is true too")
			}
			// Decrypt refuses it as invalid too, whatever the keys.
			if _, err := sops.Decrypt(c.f, []byte(c.data), nil); !errors.As(err, &se) || se.Reason != sops.ReasonInvalid {
				t.Errorf("Decrypt = %v; want reason invalid", err)
			}
		})
	}
}
