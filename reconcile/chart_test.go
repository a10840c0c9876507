package reconcile_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"recond.dev/recond/reconcile"
	"recond.dev/recond/reconcile/source"
)

// chartFiles is a chart at app/ with a vendored dependency, a values file
// at the repository's root, a Secret whose password randAlphaNum makes and
// a pre-install hook.
func chartFiles(replicas string) map[string]string {
	return map[string]string{
		"app/Chart.yaml":  "apiVersion: v2\nname: app\nversion: 1.0.0\ndependencies:\n- name: sub\n  version: 0.1.0\n",
		"app/values.yaml": "replicas: 1\n",
		"app/templates/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}-web
spec:
  replicas: {{ .Values.replicas }}
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: nginx}]
`,
		"app/templates/secret.yaml": `apiVersion: v1
kind: Secret
metadata:
  name: {{ .Release.Name }}-db
stringData:
  password: {{ randAlphaNum 20 | quote }}
`,
		"app/templates/hook.yaml":          "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hook\n  annotations: {\"helm.sh/hook\": pre-install}\n",
		"app/charts/sub/Chart.yaml":        "apiVersion: v2\nname: sub\nversion: 0.1.0\n",
		"app/charts/sub/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-sub\n",
		"prod.yaml":                        "replicas: " + replicas + "\n",
	}
}

// A chart's objects are held like any others: the first tick applies them
// (the pre-install hook run first), later ticks and a restarted process (a new
// reconciler, a new clone) write nothing, because a chart's random values
// come from the instance's seed, not from the process; a values change
// rewrites only what it changes.
func TestChartIsHeldAcrossRestarts(t *testing.T) {
	h := newHarness(t)
	h.cfg.Path = "app"
	h.helm = &source.HelmOptions{Release: "shop", Values: []string{"prod.yaml"}}
	h.repo.Commit("chart", chartFiles("2"))
	r := h.mustTick(reconcile.OutcomeApplied)
	if r.Counts.Created != 3 {
		t.Fatalf("created %d, want 3 (Deployment, Secret, the dependency's ConfigMap; the hook is run, not held): %v", r.Counts.Created, r.Changes)
	}
	if c := r.Chart; c == nil || c.Name != "app" || c.Version != "1.0.0" || strings.Join(c.Values, ",") != "prod.yaml" {
		t.Errorf("the tick's chart = %+v; want app 1.0.0 with prod.yaml", c)
	}
	if d := h.get(gvrDeployment, "shop-web"); d == nil || d.Object["spec"].(map[string]any)["replicas"] != int64(2) {
		t.Fatalf("Deployment shop-web with replicas from prod.yaml: %v", d)
	}
	if hk := h.get(gvrConfigMap, "hook"); hk == nil || hk.GetLabels()[reconcile.LabelManagedBy] != "" {
		t.Errorf("the pre-install hook: %v; want it run as a hook (not owned)", hk)
	}
	if h.get(gvrSecret, reconcile.SeedPrefix+"recond") == nil {
		t.Fatal("no seed Secret after the first chart render")
	}
	pw := func() string {
		s := h.get(gvrSecret, "shop-db")
		if s == nil {
			t.Fatal("Secret shop-db missing")
		}
		v, _ := s.Object["data"].(map[string]any)["password"].(string)
		return v
	}
	first := pw()
	for range 3 {
		h.mustTick(reconcile.OutcomeConverged)
	}
	h.rec = nil // a restarted process renders the commit afresh
	if r := h.mustTick(reconcile.OutcomeConverged); r.Chart == nil {
		t.Error("no chart in the result of a restarted process's tick")
	}
	if got := pw(); got != first {
		t.Errorf("the generated password changed across a restart: %s -> %s", first, got)
	}

	h.repo.Commit("scale", map[string]string{"prod.yaml": "replicas: 3\n"})
	r = h.mustTick(reconcile.OutcomeApplied)
	if r.Counts.Updated != 1 || !strings.Contains(r.Changes[0].String(), "Deployment/shop-web") {
		t.Errorf("a values change updated %d object(s) (%v), want the Deployment only", r.Counts.Updated, r.Changes)
	}
	if got := pw(); got != first {
		t.Errorf("the generated password changed with an unrelated values change: %s -> %s", first, got)
	}
}

// The fields a chart's certificate maker made are written when their
// object is created and kept after that: not rewritten by a restarted
// process, whose render makes another certificate, nor by a new revision,
// which still updates the object's other fields. The tick counts the
// objects (generated_once=).
func TestGeneratedOnceObjectsAreNotRewritten(t *testing.T) {
	h := newHarness(t)
	h.cfg.Path = "app"
	h.helm = &source.HelmOptions{Release: "tls"}
	files := map[string]string{
		"app/Chart.yaml":  "apiVersion: v2\nname: app\nversion: 1.0.0\n",
		"app/values.yaml": "greeting: hello\ncolor: blue\n",
		"app/templates/tls.yaml": `{{- $cert := genSelfSignedCert "web.example.com" nil nil 365 }}
apiVersion: v1
kind: Secret
metadata:
  name: web-tls
type: kubernetes.io/tls
data:
  tls.crt: {{ $cert.Cert | b64enc | quote }}
  tls.key: {{ $cert.Key | b64enc | quote }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: web
  annotations:
    checksum/tls: {{ $cert.Cert | sha256sum }}
data:
  color: {{ .Values.color }}
`,
		"app/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: greeting\ndata:\n  greeting: {{ .Values.greeting }}\n",
	}
	h.repo.Commit("tls", files)
	r := h.mustTick(reconcile.OutcomeApplied)
	if r.Counts.Created != 3 || r.Counts.GeneratedOnce != 2 {
		t.Fatalf("created %d, generated once %d; want 3 and 2", r.Counts.Created, r.Counts.GeneratedOnce)
	}
	crt := func() string {
		s := h.get(gvrSecret, "web-tls")
		if s == nil {
			t.Fatal("Secret web-tls missing")
		}
		v, _ := s.Object["data"].(map[string]any)["tls.crt"].(string)
		return v
	}
	first := crt()
	h.rec = nil // a restarted process makes another certificate
	h.mustTick(reconcile.OutcomeConverged)
	sum := h.get(gvrConfigMap, "web").GetAnnotations()["checksum/tls"]
	h.repo.Commit("greeting", map[string]string{"app/values.yaml": "greeting: hi\ncolor: red\n"})
	r = h.mustTick(reconcile.OutcomeApplied)
	if r.Counts.Updated != 2 || crt() != first {
		t.Errorf("a new revision: updated %d (%v), certificate kept %t; want the two ConfigMaps only", r.Counts.Updated, r.Changes, crt() == first)
	}
	web := h.get(gvrConfigMap, "web")
	if web.GetAnnotations()["checksum/tls"] != sum || web.Object["data"].(map[string]any)["color"] != "red" {
		t.Errorf("ConfigMap web: checksum %q (was %q), data %v; want the checksum kept and color red", web.GetAnnotations()["checksum/tls"], sum, web.Object["data"])
	}
	if err := h.dyn.Resource(gvrSecret).Namespace(h.ns).Delete(context.Background(), "web-tls", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if r = h.mustTick(reconcile.OutcomeApplied); r.Counts.Created != 1 || crt() == "" || crt() == first {
		t.Errorf("the deleted Secret: created %d; want it made again", r.Counts.Created)
	}
}
