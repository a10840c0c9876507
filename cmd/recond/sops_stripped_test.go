package main

import (
	"context"
	"os"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"recond.dev/recond/internal/testenv"
)

// A SOPS file whose metadata was removed or cut (by hand, by a merge)
// fails the read phase with reason invalid, naming the file: its
// ciphertext never reaches the API server as values, with or without a
// keys file.
func TestSOPSStrippedMetadata(t *testing.T) {
	const enc = "ENC[AES256_GCM,data:4pGbFR3G2leSTdbYTyI/262Y,iv:FhBJowzRJe3fteQqQ7b6XCMCwRK4GdYP8WL2qFEsyhw=,tag:ogdjnX71xsgREjlX1+ePBg==,type:str]"
	block := func(drop string) string {
		var b strings.Builder
		b.WriteString("sops:\n")
		for _, l := range []string{
			"    age:\n        - recipient: age1yyldu4kpezk9f2wnn62mlafdv9tzamwkafkkgjfn80fa8hg6m9hsd0w5cg\n" +
				"          enc: |\n            -----BEGIN AGE ENCRYPTED FILE-----\n            YWdlLWVuY3J5cHRpb24ub3JnL3YxCi0+IFgyNTUxOSBnbWwyRGRLRmdzbmN3aVNr\n" +
				"            -----END AGE ENCRYPTED FILE-----\n",
			"    encrypted_regex: ^(data|stringData)$\n",
			"    lastmodified: \"2026-12-02T13:05:15Z\"\n",
			"    mac: " + enc + "\n",
			"    version: 3.13.3\n",
		} {
			if drop == "" || !strings.HasPrefix(l, "    "+drop+":") {
				b.WriteString(l)
			}
		}
		return b.String()
	}
	secret := "apiVersion: v1\nkind: Secret\nmetadata:\n    name: db\nstringData:\n    password: " + enc + "\n"
	keys := t.TempDir() + "/keys.txt"
	demoKey, err := os.ReadFile("../../examples/demo-sops/age.agekey")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keys, demoKey, 0o600); err != nil {
		t.Fatal(err)
	}
	chart := map[string]string{
		"app/Chart.yaml":  "apiVersion: v2\nname: shop\nversion: 1.0.0\n",
		"app/values.yaml": "password: unset\n",
		"app/templates/secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n" +
			"stringData:\n  password: {{ .Values.password | quote }}\n",
	}
	for _, c := range []struct {
		name  string
		files map[string]string
		file  string // the file the error names
		says  string
		more  []string
	}{
		{name: "a manifest without its sops block", files: map[string]string{"secret.yaml": secret},
			file: "secret.yaml", says: "no sops metadata"},
		{name: "a manifest without its mac", files: map[string]string{"secret.yaml": secret + block("mac")},
			file: "secret.yaml", says: "has no mac"},
		{name: "a manifest without its mac, with keys", files: map[string]string{"secret.yaml": secret + block("mac")},
			file: "secret.yaml", says: "has no mac", more: []string{"--sops-age-keys-file", keys}},
		{name: "a manifest without its lastmodified", files: map[string]string{"secret.yaml": secret + block("lastmodified")},
			file: "secret.yaml", says: "has no lastmodified"},
		{name: "Helm values without their sops block", files: map[string]string{"secrets/values.yaml": "password: " + enc + "\n"},
			file: "secrets/values.yaml", says: "no sops metadata",
			more: []string{"--path", "app", "--helm-values", "secrets/values.yaml"}},
		{name: "a chart's own values without their sops block", files: map[string]string{"app/values.yaml": "password: " + enc + "\n"},
			file: "app/values.yaml", says: "SOPS-encrypted", more: []string{"--path", "app"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			repo := testenv.NewRepo(t)
			files := map[string]string{}
			if len(c.more) > 0 && c.more[0] == "--path" {
				for k, v := range chart {
					files[k] = v
				}
			}
			for k, v := range c.files {
				files[k] = v
			}
			repo.Commit("stripped", files)
			args := append(append([]string{"sync"}, clusterArgs(t, repo.URL())...), c.more...)
			ns := args[4]
			code, _, errOut := recond(t, args...)
			line := tickLine(errOut)
			for _, s := range []string{`"phase":"read"`, `"reason":"invalid"`, c.file, c.says} {
				if !strings.Contains(line, s) {
					t.Errorf("the tick line does not say %s:\n%s", s, line)
				}
			}
			if code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			if strings.Contains(errOut, "4pGbFR3G2leSTdbYTyI") {
				t.Error("the log holds the ciphertext")
			}
			l, err := cp.Client.CoreV1().Secrets(ns).List(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range l.Items {
				if s.Name == "db" {
					t.Errorf("Secret %s was applied", s.Name)
				}
			}
		})
	}
}
