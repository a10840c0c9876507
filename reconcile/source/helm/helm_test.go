package helm

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	sigsyaml "sigs.k8s.io/yaml"

	"recond.dev/recond/reconcile/source/chartspec"
	"recond.dev/recond/reconcile/source/render"
	"recond.dev/recond/reconcile/source/tree"
)

// TestBuildAndSplit: a chart of any tree renders, and SplitOutput reads
// Build's output back: the chart, each template's document with what
// recond says of it, and what was left out (crds/, a test hook).
func TestBuildAndSplit(t *testing.T) {
	root := tree.MemFiles(map[string]string{
		"app/Chart.yaml":          "apiVersion: v2\nname: app\nversion: 1.2.3\n",
		"app/values.yaml":         "name: a\n",
		"app/crds/crd.yaml":       "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: x.example.com\n",
		"app/templates/cm.yaml":   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Values.name }}\ndata:\n  now: {{ now | date \"2006\" | quote }}\n",
		"app/templates/hook.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: pre\n  annotations:\n    helm.sh/hook: pre-install\n",
		"app/templates/test.yaml": "apiVersion: v1\nkind: Pod\nmetadata:\n  name: t\n  annotations:\n    helm.sh/hook: test\n",
	})
	req := Request{Request: chartspec.Request{Release: "r", Namespace: "ns", Now: time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)}}
	out, err := Build(context.Background(), root, "app", render.NewBudget(render.DefaultLimits), req)
	if err != nil {
		t.Fatal(err)
	}
	docs, chart, crds, hooks := SplitOutput(out)
	if d := cmp.Diff(Chart{Name: "app", Version: "1.2.3"}, chart); d != "" {
		t.Errorf("chart (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"app/crds/crd.yaml"}, crds); d != "" {
		t.Errorf("crds left out (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"Pod/t (test)"}, hooks); d != "" {
		t.Errorf("hooks left out (-want +got):\n%s", d)
	}
	var got []string
	for _, d := range docs {
		got = append(got, d.Source)
		if d.Source == "app/templates/cm.yaml" && !strings.Contains(string(d.Content), `now: "2024"`) {
			t.Errorf("cm.yaml: now is not the revision's time:\n%s", d.Content)
		}
		if hook := d.Source == "app/templates/hook.yaml"; d.Meta.Hook != hook {
			t.Errorf("%s: Hook = %t", d.Source, d.Meta.Hook)
		}
	}
	if d := cmp.Diff([]string{"app/templates/cm.yaml", "app/templates/hook.yaml"}, got); d != "" {
		t.Errorf("documents (-want +got):\n%s", d)
	}
}

// TestGeneratedInputsChanged: a field is made again only when both sides
// record it, with different fingerprints.
func TestGeneratedInputsChanged(t *testing.T) {
	rec := func(fp string) map[string]string {
		return map[string]string{AnnotationGeneratedInputs: `{"/data/tls.crt":"` + fp + `"}`}
	}
	path := []string{"data", "tls.crt"}
	for _, tc := range []struct {
		name          string
		desired, live map[string]string
		path          []string
		want          bool
	}{
		{"same", rec("a"), rec("a"), path, false},
		{"changed", rec("a"), rec("b"), path, true},
		{"live records none", rec("a"), nil, path, false},
		{"another field", rec("a"), rec("b"), []string{"data", "tls.key"}, false},
	} {
		if got := GeneratedInputsChanged(tc.desired, tc.live, tc.path); got != tc.want {
			t.Errorf("%s: %t, want %t", tc.name, got, tc.want)
		}
	}
	if got := chartspec.JSONPointer([]string{"a/b", "c~d"}); got != "/a~1b/c~0d" {
		t.Errorf("JSONPointer = %q", got)
	}
}

// TestCertificateMakers: the certificate makers that make their own key
// (with one made ahead for the certificate a CA signs) make RSA keys of
// Sprig's size, each once, that match their certificates, a certificate
// signed by its CA; and the render with stand-ins still tells the fields
// they made.
func TestCertificateMakers(t *testing.T) {
	root := tree.MemFiles(map[string]string{
		"app/Chart.yaml": "apiVersion: v2\nname: app\nversion: 1.0.0\n",
		"app/templates/tls.yaml": `{{- $ca := genCA "ca" 365 }}
{{- $cert := genSignedCert "svc" nil (list "svc") 365 $ca }}
{{- $self := genSelfSignedCert "self" nil nil 365 }}
apiVersion: v1
kind: Secret
metadata:
  name: tls
stringData:
  ca.crt: {{ $ca.Cert | quote }}
  ca.key: {{ $ca.Key | quote }}
  tls.crt: {{ $cert.Cert | quote }}
  tls.key: {{ $cert.Key | quote }}
  self.crt: {{ $self.Cert | quote }}
  self.key: {{ $self.Key | quote }}
`,
	})
	req := Request{Request: chartspec.Request{Release: "r", Namespace: "ns", Now: time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)}}
	out, err := Build(context.Background(), root, "app", render.NewBudget(render.DefaultLimits), req)
	if err != nil {
		t.Fatal(err)
	}
	docs, _, _, _ := SplitOutput(out)
	if len(docs) != 1 {
		t.Fatalf("%d documents, want 1", len(docs))
	}
	if len(docs[0].Meta.Generated) != 6 {
		t.Errorf("generated fields %v, want the 6 of stringData", docs[0].Meta.Generated)
	}
	var obj struct {
		StringData map[string]string `json:"stringData"`
	}
	if err := sigsyaml.Unmarshal(docs[0].Content, &obj); err != nil {
		t.Fatal(err)
	}
	certs := map[string]*x509.Certificate{}
	keys := map[string]*rsa.PrivateKey{}
	for _, name := range []string{"ca", "tls", "self"} {
		b, _ := pem.Decode([]byte(obj.StringData[name+".crt"]))
		if b == nil {
			t.Fatalf("%s.crt: no PEM", name)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatalf("%s.crt: %v", name, err)
		}
		k, _ := pem.Decode([]byte(obj.StringData[name+".key"]))
		if k == nil || k.Type != "RSA PRIVATE KEY" {
			t.Fatalf("%s.key: not a PEM RSA key", name)
		}
		key, err := x509.ParsePKCS1PrivateKey(k.Bytes)
		if err != nil {
			t.Fatalf("%s.key: %v", name, err)
		}
		if key.N.BitLen() != keyBits {
			t.Errorf("%s.key: %d bits, want %d", name, key.N.BitLen(), keyBits)
		}
		if !key.PublicKey.Equal(c.PublicKey) {
			t.Errorf("%s.key is not the key of %s.crt", name, name)
		}
		for other, k := range keys {
			if k.Equal(key) {
				t.Errorf("%s.key is %s.key", name, other)
			}
		}
		certs[name], keys[name] = c, key
	}
	if err := certs["tls"].CheckSignatureFrom(certs["ca"]); err != nil {
		t.Errorf("tls.crt is not signed by ca.crt: %v", err)
	}
}

// TestIsTemplate: the files Helm loads as templates, of a chart and of
// its subcharts.
func TestIsTemplate(t *testing.T) {
	for _, tc := range []struct {
		rel  string
		want bool
	}{
		{"templates/cm.yaml", true},
		{"templates/_helpers.tpl", true},
		{"charts/sub/templates/cm.yaml", true},
		{"charts/sub/charts/deeper/templates/x.yaml", true},
		{"values.yaml", false},
		{"Chart.yaml", false},
		{"crds/crd.yaml", false},
		{"files/templates/x.yaml", false},
		{"charts/sub/values.yaml", false},
		{"charts/templates/x.yaml", false},
		{"charts/sub.tgz", false},
	} {
		if got := isTemplate(tc.rel); got != tc.want {
			t.Errorf("isTemplate(%q) = %t, want %t", tc.rel, got, tc.want)
		}
	}
}
