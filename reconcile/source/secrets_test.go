package source

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"recond.dev/recond/internal/redact/redacttest"
)

// A Git author's typos in a Secret, a secretGenerator, or a value a
// kustomize error would quote: the render fails naming the file, the object
// and the key, and no rendering of the error holds the value, raw or
// base64.
func TestRenderErrorsNeverQuoteSecretValues(t *testing.T) {
	v := redacttest.Value(t)
	digits := redacttest.Digits(t)
	secret := func(body string) string {
		return "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n" + body
	}
	b64 := base64.StdEncoding.EncodeToString([]byte(v))
	tests := []struct {
		name   string
		files  map[string]string
		values []string // must not appear (v and its base64 always checked)
		says   []string // must appear
	}{{
		name: "secretGenerator literal without =",
		files: map[string]string{"kustomization.yaml": "secretGenerator:\n- name: db\n  literals:\n  - user=admin-" + v +
			"\n  - password:" + v + "\n"},
		says: []string{"kustomization.yaml", "Secret/db", "literals[1]", `"password…"`, "not key=value"},
	}, {
		name:  "secretGenerator literal key that a Secret may not hold",
		files: map[string]string{"kustomization.yaml": "secretGenerator:\n- name: db\n  literals:\n  - db password=" + v + "\n"},
		says:  []string{"kustomization.yaml", "Secret/db", "literals[0]", `"db…"`, "not a valid Secret key"},
	}, {
		name: "env file line written with a colon",
		files: map[string]string{
			"kustomization.yaml": "secretGenerator:\n- name: db\n  envs:\n  - db.env\n",
			"db.env":             "# credentials\nDB_USER=admin\nDB_PASSWORD: " + v + "\n",
		},
		says: []string{"kustomization.yaml", "Secret/db", "envs db.env line 3", `"DB_PASSWORD…"`, "not a valid Secret key"},
	}, {
		name: "env file line that is not UTF-8",
		files: map[string]string{
			"kustomization.yaml": "secretGenerator:\n- name: db\n  env: db.env\n",
			"db.env":             "DB_PASSWORD=" + v + "\xff\n",
		},
		says: []string{"kustomization.yaml", "Secret/db", "envs db.env line 1", "not valid UTF-8"},
	}, {
		name:   "unquoted long number in stringData",
		files:  map[string]string{"secret.yaml": secret("stringData:\n  pin: " + digits + "\n")},
		values: []string{digits},
		says:   []string{"secret.yaml", "Secret/db", "stringData.pin: number", "not shown"},
	}, {
		name:   "unquoted long number in stringData, JSON",
		files:  map[string]string{"secret.json": `{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"}, "stringData": {"pin": ` + digits + `}}`},
		values: []string{digits},
		says:   []string{"secret.json", "Secret/db", "stringData.pin: number"},
	}, {
		name:   "unquoted long number in stringData, in a List",
		files:  map[string]string{"list.yaml": "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Secret\n  metadata: {name: db}\n  stringData: {pin: " + digits + "}\n"},
		values: []string{digits},
		says:   []string{"list.yaml", "Secret/db", "stringData.pin: number"},
	}, {
		name: "unquoted long number in stringData, through kustomize",
		files: map[string]string{
			"kustomization.yaml": kust("secret.yaml"),
			"secret.yaml":        secret("stringData:\n  pin: " + digits + "\n"),
		},
		values: []string{digits},
		says:   []string{"secret.yaml", "Secret/db", "stringData.pin: number"},
	}, {
		name: "long number in a secretGenerator's file",
		files: map[string]string{
			"kustomization.yaml": "secretGenerator:\n- name: db\n  files:\n  - conf.yaml\n",
			"conf.yaml":          "apiVersion: example.com/v1\nkind: Conf\npin: " + digits + "\n",
		},
		values: []string{digits},
		says:   []string{"conf.yaml", "pin: number"},
	}, {
		name:  "Secret key that holds a value",
		files: map[string]string{"secret.yaml": secret("stringData:\n  \"DB_PASSWORD: " + v + "\": x\n")},
		says:  []string{"secret.yaml", "Secret/db", "stringData: key", `"DB_PASSWORD…"`},
	}, {
		name:  "data key that holds a value",
		files: map[string]string{"secret.yaml": secret("data:\n  \"PIN " + v + "\": " + b64 + "\n")},
		says:  []string{"secret.yaml", "Secret/db", "data: key", `"PIN…"`, "not a valid Secret key"},
	}, {
		// kustomize's own error quotes the node it could not descend into:
		// the value of the Secret, removed from the text.
		name: "kustomize error that quotes a value",
		files: map[string]string{
			"kustomization.yaml": kust("secret.yaml") + "replacements:\n- source: {kind: Secret, name: db, fieldPath: stringData.password}\n" +
				"  targets:\n  - select: {kind: Secret, name: db}\n    fieldPaths: [stringData.password.x]\n",
			"secret.yaml": secret("stringData:\n  password: " + v + "\n"),
		},
		says: []string{"kustomize build", "stringData.password.x", "<redacted>"},
	}, {
		name: "kustomize error that quotes a data value",
		files: map[string]string{
			"kustomization.yaml": kust("secret.yaml") + "replacements:\n- source: {kind: Secret, name: db, fieldPath: data.password}\n" +
				"  targets:\n  - select: {kind: Secret, name: db}\n    fieldPaths: [data.password.x]\n",
			"secret.yaml": secret("data:\n  password: " + b64 + "\n"),
		},
		says: []string{"kustomize build", "data.password.x", "<redacted>"},
	}, {
		name: "kustomize error that quotes a generated value",
		files: map[string]string{
			"kustomization.yaml": "secretGenerator:\n- name: db\n  literals:\n  - password=" + v + "\nreplacements:\n- source: {kind: Secret, name: db, fieldPath: data.password}\n" +
				"  targets:\n  - select: {kind: Secret}\n    fieldPaths: [data.password.x]\n",
		},
		says: []string{"kustomize build", "data.password.x"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			sha := newTestRepo(t, dir).commit(tt.files)
			_, err := mustNew(t, Config{URL: dir}).Render(context.Background(), sha)
			if err == nil {
				t.Fatal("Render succeeded, want an error")
			}
			var me *ManifestError
			if !errors.As(err, &me) {
				t.Errorf("error %v is not a *ManifestError", err)
			}
			text := redacttest.Renderings(err)
			for _, s := range tt.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			for _, value := range append(tt.values, v, b64) {
				if strings.Contains(text, value) {
					t.Errorf("error quotes the secret value %q:\n%s", value, text)
				}
			}
		})
	}
}

// A value that starts with a YAML indicator, written unquoted into a
// Secret (or, decrypted, into any document), fails the parser, whose
// message quotes the value but its first character ("unknown anchor
// 'Xk9…' referenced", "cannot decode !!str `Xk9…` as a !!int"): the error
// says the file, the document, the line and the column, never the
// parser's message; a document that holds no secret material keeps it.
func TestParseErrorsAboutSecretMaterialSayWhereOnly(t *testing.T) {
	core := "Xk9" + redacttest.Value(t)
	secret := func(value string) string {
		return "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  user: app\n  password: " + value + "\n"
	}
	tests := []struct {
		name  string
		files map[string]string
		says  []string
	}{{
		name:  "an alias in a Secret",
		files: map[string]string{"secret.yaml": secret("*" + core)},
		says:  []string{"secret.yaml: document 1, line 7, column 13: not valid YAML", "not shown"},
	}, {
		name:  "a tag in a Secret",
		files: map[string]string{"secret.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n---\n" + secret("!!int "+core)},
		says:  []string{"secret.yaml: document 2, line 11, column 19: not valid YAML", "not shown"},
	}, {
		name:  "an alias in a Secret in a JSON-like flow",
		files: map[string]string{"secret.yaml": "{apiVersion: v1, kind: Secret, metadata: {name: db}, stringData: {password: *" + core + "}}\n"},
		says:  []string{"secret.yaml: document 1", "not valid", "not shown"},
	}, {
		// Kustomize parses the Secret again and fails quoting what the
		// parser quoted: the quote is secret material.
		name: "an alias in a kustomization's Secret",
		files: map[string]string{
			"kustomization.yaml": kust("secret.yaml"),
			"secret.yaml":        secret("*" + core),
		},
		says: []string{"kustomize build", "<redacted>"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			sha := newTestRepo(t, dir).commit(tt.files)
			_, err := mustNew(t, Config{URL: dir}).Render(context.Background(), sha)
			if err == nil {
				t.Fatal("Render succeeded, want an error")
			}
			if text := redacttest.Renderings(err); strings.Contains(text, core) || strings.Contains(text, core[1:]) {
				t.Errorf("error quotes the value:\n%s", text)
			}
			for _, s := range tt.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			var me *ManifestError
			if !errors.As(err, &me) {
				t.Errorf("error %v is not a *ManifestError", err)
			}
		})
	}
	// No secret material: the parser's message is the error.
	dir := t.TempDir()
	sha := newTestRepo(t, dir).commit(map[string]string{"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata:\n  k: *nowhere\n"})
	if _, err := mustNew(t, Config{URL: dir}).Render(context.Background(), sha); err == nil || !strings.Contains(err.Error(), "unknown anchor 'nowhere' referenced") {
		t.Errorf("a ConfigMap's error = %v, want the parser's message", err)
	}
}
