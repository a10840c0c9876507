package source

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"recond.dev/recond/internal/redact/redacttest"
	"recond.dev/recond/internal/testenv"
)

// sopsFixture is a SOPS setup for one test: two age keys (the files are
// encrypted for both) and the sops CLI (what the real one made for the
// test, testenv.SOPS).
type sopsFixture struct {
	*testenv.SOPS
	id1, rcpt1, id2, rcpt2 string
}

func newSOPSFixture(t *testing.T) *sopsFixture {
	t.Helper()
	s := testenv.NewSOPS(t)
	f := &sopsFixture{SOPS: s}
	f.id1, f.rcpt1 = s.Keygen()
	f.id2, f.rcpt2 = s.Keygen()
	return f
}

// sopsValue is a value no output holds by chance, the same at every run of
// t (testenv.FixtureText), so that what sops made of it is found again.
func sopsValue(t *testing.T) string { return "v" + testenv.FixtureText(t) }

// enc encrypts plain as file name for both recipients, with extra sops
// arguments.
func (f *sopsFixture) enc(name, plain string, args ...string) string {
	return string(f.Encrypt(name, []byte(plain), append([]string{"--age", f.rcpt1 + "," + f.rcpt2}, args...)...))
}

// Files encrypted by the real sops are decrypted as they are read, in each
// place the repository may hold them, in-process and in the render worker:
// whole manifests (plain files and a kustomization's resources, YAML and
// JSON, whole-file or with --encrypted-regex), a secretGenerator's files
// and envs in every format SOPS writes (YAML, JSON, dotenv, binary), and
// Helm values files (--helm-values, a helmCharts entry's valuesFile). Either
// key opens them. What the render decrypted that is secret is told
// (SensitiveValues): a values file's encrypted values and a decrypted
// Secret's data, never a plain value.
func TestDecryptWhereFilesAreRead(t *testing.T) {
	f := newSOPSFixture(t)
	pw, token, cert, env, conf, values := sopsValue(t), sopsValue(t), sopsValue(t), sopsValue(t), sopsValue(t), sopsValue(t)
	secret := func(name, body string) string {
		return "apiVersion: v1\nkind: Secret\nmetadata:\n  name: " + name + "\ntype: Opaque\n" + body
	}
	const cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plain\ndata:\n  mode: fast\n"
	chart := map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: app\nversion: 1.0.0\n",
		"values.yaml": "password: none\nreplicas: 1\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-values\ndata:\n" +
			"  url: \"postgres://app:{{ .Values.password }}@db/shop\"\n  replicas: \"{{ .Values.replicas }}\"\n",
	}
	under := func(dir string, files map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range files {
			out[dir+"/"+k] = v
		}
		return out
	}
	tests := []struct {
		name      string
		files     map[string]string
		path      string
		values    []string // --helm-values
		keys      []string // identities in the keys file
		want      map[string]string
		sensitive []string
	}{{
		name: "plain files: encrypted-regex YAML and whole-file JSON",
		files: map[string]string{
			"cm.yaml":     cm,
			"db.yaml":     f.enc("db.yaml", secret("db", "stringData:\n  password: "+pw+"\n"), "--encrypted-regex", "^(data|stringData)$"),
			"token.json":  f.enc("token.json", `{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "token"}, "data": {"token": "`+base64.StdEncoding.EncodeToString([]byte(token))+`"}}`),
			"README.json": `{"sops": "not metadata", "mac": 1, "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "readme"}}`,
		},
		keys: []string{f.id1},
		want: map[string]string{"Secret/db stringData.password": pw, "Secret/token data.token": base64.StdEncoding.EncodeToString([]byte(token)),
			"ConfigMap/plain data.mode": "fast"},
		sensitive: []string{pw, token, base64.StdEncoding.EncodeToString([]byte(token))},
	}, {
		name: "kustomize: a resource and secretGenerator sources in every format",
		files: map[string]string{
			"kustomization.yaml": "resources:\n- db.enc.yaml\n- cm.yaml\ngeneratorOptions:\n  disableNameSuffixHash: true\nsecretGenerator:\n" +
				"- name: files\n  files:\n  - tls.crt\n  - conf.json\n  - app.yaml\n- name: env\n  envs:\n  - db.env\n",
			"cm.yaml":     cm,
			"db.enc.yaml": f.enc("db.enc.yaml", secret("db", "stringData:\n  password: "+pw+"\n"), "--encrypted-regex", "^(data|stringData)$"),
			"tls.crt":     f.enc("tls.crt", "-----BEGIN CERT-----\n"+cert+"\n-----END CERT-----\n"),
			"conf.json":   f.enc("conf.json", `{"token": "`+token+`"}`),
			"app.yaml":    f.enc("app.yaml", "conf: "+conf+"\n"),
			"db.env":      f.enc("db.env", "DB_PASSWORD="+env+"\nDB_USER=app\n"),
		},
		keys: []string{f.id2},
		want: map[string]string{
			"Secret/db stringData.password": pw,
			"Secret/files data.tls.crt":     base64.StdEncoding.EncodeToString([]byte("-----BEGIN CERT-----\n" + cert + "\n-----END CERT-----\n")),
			"Secret/env data.DB_PASSWORD":   base64.StdEncoding.EncodeToString([]byte(env)),
			"Secret/env data.DB_USER":       base64.StdEncoding.EncodeToString([]byte("app")),
		},
		sensitive: []string{pw, env, cert},
	}, {
		name:      "a chart's --helm-values file",
		files:     under("app", chart),
		path:      "app",
		values:    []string{"secrets/prod.yaml"},
		keys:      []string{f.id1, f.id2},
		want:      map[string]string{"ConfigMap/from-values data.url": "postgres://app:" + values + "@db/shop", "ConfigMap/from-values data.replicas": "3"},
		sensitive: []string{values},
	}, {
		name: "a chart at the root, its encrypted values file among its files",
		files: func() map[string]string {
			m := under("x", chart)
			out := map[string]string{}
			for k, v := range m {
				out[strings.TrimPrefix(k, "x/")] = v
			}
			out["secrets.yaml"] = f.enc("secrets.yaml", "password: "+values+"\nreplicas: 3\n", "--encrypted-regex", "^password$")
			return out
		}(),
		values:    []string{"secrets.yaml"},
		keys:      []string{f.id1},
		want:      map[string]string{"ConfigMap/from-values data.url": "postgres://app:" + values + "@db/shop", "ConfigMap/from-values data.replicas": "3"},
		sensitive: []string{values},
	}, {
		// A chart with a key maker is rendered twice (helm.go): the
		// second render decrypts its values file too.
		name: "a chart with a key maker and an encrypted values file",
		files: func() map[string]string {
			m := under("app", chart)
			m["app/templates/key.yaml"] = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: key\nstringData:\n  key: {{ genPrivateKey \"ecdsa\" | quote }}\n"
			m["secrets/prod.yaml"] = f.enc("prod.yaml", "password: "+values+"\nreplicas: 3\n", "--encrypted-regex", "^password$")
			return m
		}(),
		path:      "app",
		values:    []string{"secrets/prod.yaml"},
		keys:      []string{f.id1},
		want:      map[string]string{"ConfigMap/from-values data.url": "postgres://app:" + values + "@db/shop"},
		sensitive: []string{values},
	}, {
		name: "a kustomization's helmCharts valuesFile",
		files: func() map[string]string {
			m := under("k/charts/app", chart)
			m["k/kustomization.yaml"] = "helmCharts:\n- name: app\n  valuesFile: secret-values.yaml\n"
			m["k/secret-values.yaml"] = f.enc("secret-values.yaml", "password: "+values+"\nreplicas: 3\n", "--encrypted-regex", "^password$")
			return m
		}(),
		path:      "k",
		keys:      []string{f.id2},
		want:      map[string]string{"ConfigMap/from-values data.url": "postgres://app:" + values + "@db/shop", "ConfigMap/from-values data.replicas": "3"},
		sensitive: []string{values},
	}}
	// The chart's values file is shared by the chart cases.
	tests[2].files["secrets/prod.yaml"] = f.enc("prod.yaml", "password: "+values+"\nreplicas: 3\n", "--encrypted-regex", "^password$")
	for _, tt := range tests {
		for _, worker := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/worker=%t", tt.name, worker), func(t *testing.T) {
				dir := t.TempDir()
				sha := newTestRepo(t, dir).commit(tt.files)
				cfg := Config{URL: dir, Path: tt.path, SOPSAgeKeysFile: f.KeysFile(tt.keys...)}
				cfg.Helm.Values = tt.values
				// A key maker's fingerprints over decrypted values are keyed
				// with the seed (helmgenerated.go).
				cfg.Helm.Seed = func(context.Context) ([]byte, error) { return []byte("seed"), nil }
				if worker {
					cfg.Worker = testWorker(t)
				}
				s := mustNew(t, cfg)
				ms, err := s.Render(context.Background(), sha)
				if err != nil {
					t.Fatal(err)
				}
				got := map[string]string{}
				for _, m := range ms {
					for _, field := range []string{"data", "stringData"} {
						d, _ := m.Object.Object[field].(map[string]any)
						for k, v := range d {
							got[m.Object.GetKind()+"/"+m.Object.GetName()+" "+field+"."+k], _ = v.(string)
						}
					}
				}
				for k, v := range tt.want {
					if strings.ReplaceAll(got[k], "\n", "") != v { // kustomize wraps long base64
						t.Errorf("%s = %q, want %q", k, got[k], v)
					}
				}
				if c, ok := got["Secret/files data.conf.json"]; ok {
					if b, _ := base64.StdEncoding.DecodeString(c); !strings.Contains(string(b), token) || strings.Contains(string(b), "ENC[") {
						t.Errorf("conf.json decrypted to %q", b)
					}
				}
				sens := s.SensitiveValues(sha)
				for _, v := range tt.sensitive {
					if !slices.ContainsFunc(sens, func(s string) bool { return strings.Contains(s, v) }) {
						t.Errorf("SensitiveValues lacks %q", v)
					}
				}
				for _, plain := range []string{"fast", "3", "Secret", "v1", "db", "token", "none"} {
					if slices.Contains(sens, plain) {
						t.Errorf("SensitiveValues holds %q, which was never encrypted or is no value", plain)
					}
				}
			})
		}
	}
}

// What may not be decrypted, or cannot be, fails the render naming the
// file, in-process and in the worker alike, and no error quotes a value:
// an encrypted object that is not a Secret (its decrypted values would be
// shown), an encrypted configMapGenerator source, a changed ciphertext or
// MAC (reason invalid); a keys file without the key, or none (reason auth,
// naming the recipients).
func TestDecryptRefusals(t *testing.T) {
	f := newSOPSFixture(t)
	other, otherRcpt := f.Keygen()
	v := sopsValue(t)
	secret := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: " + v + "\n"
	encSecret := f.enc("db.yaml", secret, "--encrypted-regex", "^(data|stringData)$")
	tamper := func(s, field string) string {
		// Flip one base64 character of the first ENC[...]'s field.
		i := strings.Index(s, field+":")
		if i < 0 {
			t.Fatalf("no %s in %q", field, s)
		}
		i += len(field) + 1
		c := byte('A')
		if s[i] == 'A' {
			c = 'B'
		}
		return s[:i] + string(c) + s[i+1:]
	}
	tests := []struct {
		name   string
		files  map[string]string
		keys   []string // nil: no keys file
		reason Reason   // "" for invalid (*ManifestError)
		says   []string
	}{{
		name:  "an encrypted ConfigMap",
		files: map[string]string{"cm.yaml": f.enc("cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: leak\ndata:\n  password: "+v+"\n", "--encrypted-regex", "^data$")},
		keys:  []string{f.id1},
		says:  []string{"cm.yaml", "kind ConfigMap", "only Secrets"},
	}, {
		name: "an encrypted ConfigMap through kustomize",
		files: map[string]string{"kustomization.yaml": "resources:\n- cm.yaml\n",
			"cm.yaml": f.enc("cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: leak\ndata:\n  password: "+v+"\n")},
		keys: []string{f.id1},
		says: []string{"cm.yaml", "kind ConfigMap", "only Secrets"},
	}, {
		name: "an encrypted configMapGenerator env",
		files: map[string]string{"kustomization.yaml": "configMapGenerator:\n- name: leak\n  envs:\n  - app.env\n",
			"app.env": f.enc("app.env", "PASSWORD="+v+"\n")},
		keys: []string{f.id1},
		says: []string{"app.env", "configMapGenerator"},
	}, {
		name: "an encrypted env read by a configMapGenerator and a secretGenerator",
		files: map[string]string{"kustomization.yaml": "secretGenerator:\n- name: db\n  envs:\n  - app.env\nconfigMapGenerator:\n- name: leak\n  envs:\n  - app.env\n",
			"app.env": f.enc("app.env", "PASSWORD="+v+"\n")},
		keys: []string{f.id1},
		says: []string{"app.env", "configMapGenerator"},
	}, {
		name: "an encrypted ConfigMap that is a resource and a secretGenerator's file",
		files: map[string]string{"kustomization.yaml": "resources:\n- cm.yaml\nsecretGenerator:\n- name: db\n  files:\n  - cm.yaml\n",
			"cm.yaml": f.enc("cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: leak\ndata:\n  password: "+v+"\n")},
		keys: []string{f.id1},
		says: []string{"cm.yaml", "only Secrets"},
	}, {
		name: "an encrypted Secret as a patch of a ConfigMap",
		files: map[string]string{"kustomization.yaml": "resources:\n- cm.yaml\npatches:\n- path: secret.yaml\n  target: {kind: ConfigMap}\n",
			"cm.yaml":     "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n",
			"secret.yaml": f.enc("secret.yaml", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: app\n  annotations:\n    note: "+v+"\n")},
		keys: []string{f.id1},
		says: []string{"secret.yaml", "patches"},
	}, {
		// Matching is linear, but in the product of the expression's and
		// the key's lengths: a costly rule against a long key is refused
		// before it is tested.
		name: "a costly rule against a long key",
		files: map[string]string{"db.yaml": strings.Replace(strings.Replace(encSecret, "encrypted_regex: ^(data|stringData)$",
			"encrypted_regex: '"+strings.Repeat("[a-z]{20}", 12)+"[0-9]'", 1), "metadata:\n", "metadata:\n    ? "+strings.Repeat("a", 200000)+"\n    : x\n", 1)},
		keys: []string{f.id1},
		says: []string{"db.yaml", "longer than"},
	}, {
		// Short to write, costly to run: refused by its compiled size.
		name: "a rule that compiles to a costly program",
		files: map[string]string{"db.yaml": strings.Replace(encSecret, "encrypted_regex: ^(data|stringData)$",
			"encrypted_regex: '"+strings.Repeat(".{0,1000}", 20)+"z'", 1)},
		keys: []string{f.id1},
		says: []string{"db.yaml", "instructions"},
	}, {
		// Transformer and generator configurations are read by no role:
		// an encrypted Secret they point at is refused.
		name: "an encrypted Secret read by a PatchTransformer's configuration",
		files: map[string]string{"kustomization.yaml": "resources:\n- cm.yaml\ntransformers:\n- pt.yaml\n",
			"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n",
			"pt.yaml": "apiVersion: builtin\nkind: PatchTransformer\nmetadata:\n  name: pt\npath: db.yaml\ntarget:\n  kind: ConfigMap\n",
			"db.yaml": f.enc("db.yaml", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: app\n  annotations:\n    note: "+v+"\n")},
		keys: []string{f.id1},
		says: []string{"db.yaml", "only those may be encrypted"},
	}, {
		name: "a chart's own values.yaml encrypted",
		files: map[string]string{"Chart.yaml": "apiVersion: v2\nname: app\nversion: 1.0.0\n",
			"values.yaml": f.enc("values.yaml", "password: "+v+"\n")},
		keys: []string{f.id1},
		says: []string{"values.yaml", "--helm-values"},
	}, {
		name:  "a changed ciphertext",
		files: map[string]string{"db.yaml": tamper(encSecret, "password: ENC[AES256_GCM,data")},
		keys:  []string{f.id1},
		says:  []string{"db.yaml", "SOPS"},
	}, {
		name:  "a changed MAC",
		files: map[string]string{"db.yaml": strings.Replace(encSecret, "mac: ENC[AES256_GCM,data:", "mac: ENC[AES256_GCM,data:A", 1)},
		keys:  []string{f.id1},
		says:  []string{"db.yaml", "SOPS"},
	}, {
		name:   "a keys file without the key",
		files:  map[string]string{"db.yaml": encSecret},
		keys:   []string{other},
		reason: ReasonAuth,
		says:   []string{"db.yaml", f.rcpt1, f.rcpt2},
	}, {
		name:   "no keys file",
		files:  map[string]string{"db.yaml": encSecret},
		reason: ReasonAuth,
		says:   []string{"db.yaml", FlagSOPSAgeKeysFile},
	}, {
		name:   "a generator source no key opens",
		files:  map[string]string{"kustomization.yaml": "secretGenerator:\n- name: db\n  envs:\n  - db.env\n", "db.env": f.enc("db.env", "PASSWORD="+v+"\n")},
		keys:   []string{other},
		reason: ReasonAuth,
		says:   []string{"db.env", f.rcpt1},
	}}
	_ = otherRcpt
	for _, tt := range tests {
		for _, worker := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/worker=%t", tt.name, worker), func(t *testing.T) {
				dir := t.TempDir()
				sha := newTestRepo(t, dir).commit(tt.files)
				cfg := Config{URL: dir}
				if tt.keys != nil {
					cfg.SOPSAgeKeysFile = f.KeysFile(tt.keys...)
				}
				if worker {
					cfg.Worker = testWorker(t)
				}
				_, err := mustNew(t, cfg).Render(context.Background(), sha)
				if err == nil {
					t.Fatal("Render succeeded, want an error")
				}
				var (
					me *ManifestError
					se *Error
				)
				switch {
				case tt.reason == "" && !errors.As(err, &me):
					t.Errorf("error %v is not a *ManifestError (reason invalid)", err)
				case tt.reason != "" && (!errors.As(err, &se) || se.Reason != tt.reason || errors.As(err, &me)):
					t.Errorf("error %v: want an *Error with reason %s, not a *ManifestError", err, tt.reason)
				}
				for _, s := range tt.says {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not say %q", err, s)
					}
				}
				text := redacttest.Renderings(err)
				for _, secret := range []string{v, base64.StdEncoding.EncodeToString([]byte(v)), f.id1, f.id2, other} {
					if strings.Contains(text, secret) {
						t.Errorf("error quotes a value or a key %q:\n%s", secret, text)
					}
				}
			})
		}
	}
}

// The keys file is read at every render, and a source tells when it
// changed since it rendered a revision (the loop renders again on demand).
func TestKeysFileReadAtEveryRender(t *testing.T) {
	f := newSOPSFixture(t)
	other, _ := f.Keygen()
	v := sopsValue(t)
	dir := t.TempDir()
	sha := newTestRepo(t, dir).commit(map[string]string{
		"db.yaml": f.enc("db.yaml", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: "+v+"\n"),
	})
	keys := f.KeysFile(other)
	s := mustNew(t, Config{URL: dir, SOPSAgeKeysFile: keys})
	if _, err := s.Render(context.Background(), sha); err == nil {
		t.Fatal("rendered without the key")
	}
	writeAgeKeys(t, keys, f.id1)
	if _, err := s.Render(context.Background(), sha); err != nil {
		t.Fatalf("the keys file was not read again: %v", err)
	}
	if s.KeysChanged(sha) {
		t.Error("KeysChanged with the keys the render read")
	}
	writeAgeKeys(t, keys, f.id1, other)
	if !s.KeysChanged(sha) {
		t.Error("KeysChanged is false after the keys file changed")
	}
}

// writeAgeKeys replaces the keys file at p with identities.
func writeAgeKeys(t *testing.T, p string, identities ...string) {
	t.Helper()
	if err := os.WriteFile(p, []byte("# keys\n"+strings.Join(identities, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A decrypted value cannot leave by another route: a chart's files are
// read as committed (a template that reads an encrypted Secret with
// .Files.Get gets its ciphertext), and a secretGenerator's source that is
// also a helmCharts values file has its values secret one by one.
func TestDecryptedValuesTakeNoOtherRoute(t *testing.T) {
	f := newSOPSFixture(t)
	v := sopsValue(t)
	chart := map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: app\nversion: 1.0.0\n",
		"values.yaml": "password: none\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: copy\ndata:\n" +
			"  raw: {{ .Files.Get \"files/db.yaml\" | quote }}\n  b64: {{ .Files.Get \"files/db.yaml\" | b64enc | quote }}\n" +
			"  pw: {{ .Values.password | quote }}\n",
	}
	secret := f.enc("db.yaml", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: "+v+"\n")
	tests := []struct {
		name  string
		files map[string]string
		path  string
		// leaks are values no rendered object may hold; sensitive those
		// SensitiveValues must.
		leaks, sensitive []string
	}{{
		name: "a chart reads an encrypted Secret with .Files.Get",
		files: map[string]string{"app/Chart.yaml": chart["Chart.yaml"], "app/values.yaml": chart["values.yaml"],
			"app/templates/cm.yaml": chart["templates/cm.yaml"], "app/files/db.yaml": secret},
		path:  "app",
		leaks: []string{v, base64.StdEncoding.EncodeToString([]byte(v))},
	}, {
		name: "a secretGenerator's file that is also a helmCharts values file",
		files: map[string]string{"k/charts/app/Chart.yaml": chart["Chart.yaml"], "k/charts/app/values.yaml": chart["values.yaml"],
			"k/charts/app/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: copy\ndata:\n  pw: {{ .Values.password | quote }}\n",
			"k/kustomization.yaml":           "helmCharts:\n- name: app\n  valuesFile: app.yaml\nsecretGenerator:\n- name: db\n  files:\n  - app.yaml\n",
			"k/app.yaml":                     f.enc("app.yaml", "password: "+v+"\n")},
		path:      "k",
		sensitive: []string{v},
	}}
	for _, tt := range tests {
		for _, worker := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/worker=%t", tt.name, worker), func(t *testing.T) {
				dir := t.TempDir()
				sha := newTestRepo(t, dir).commit(tt.files)
				cfg := Config{URL: dir, Path: tt.path, SOPSAgeKeysFile: f.KeysFile(f.id1)}
				if worker {
					cfg.Worker = testWorker(t)
				}
				s := mustNew(t, cfg)
				ms, err := s.Render(context.Background(), sha)
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range ms {
					js, _ := m.Object.MarshalJSON()
					for _, leak := range tt.leaks {
						if strings.Contains(string(js), leak) {
							t.Errorf("%s/%s holds the decrypted value %q", m.Object.GetKind(), m.Object.GetName(), leak)
						}
					}
				}
				for _, want := range tt.sensitive {
					if !slices.Contains(s.SensitiveValues(sha), want) {
						t.Errorf("SensitiveValues lacks %q: %q", want, s.SensitiveValues(sha))
					}
				}
			})
		}
	}
}

// Renders of several revisions (one abandoned by its tick while a newer
// one runs) each keep what they decrypted: the last keptRenders of them.
func TestSensitiveValuesKeptPerRevision(t *testing.T) {
	s := &Source{}
	for i := range keptRenders + 1 {
		s.keepSensitive(sensitiveAt{sha: fmt.Sprint(i), values: []string{fmt.Sprint("v", i)}})
	}
	if got := s.SensitiveValues("0"); got != nil {
		t.Errorf("the oldest revision is still kept: %q", got)
	}
	for i := 1; i <= keptRenders; i++ {
		if got := s.SensitiveValues(fmt.Sprint(i)); len(got) != 1 || got[0] != fmt.Sprint("v", i) {
			t.Errorf("revision %d: %q", i, got)
		}
	}
	s.keepSensitive(sensitiveAt{sha: "2", values: []string{"again"}})
	if got := s.SensitiveValues("2"); len(got) != 1 || got[0] != "again" || len(s.sensitive) != keptRenders {
		t.Errorf("rendered again: %q, %d kept", got, len(s.sensitive))
	}
}
