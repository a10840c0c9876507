package source

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// helmChart is a small chart at app/: a library of helpers, a dependency
// vendored as a directory under charts/, a schema with an internal $ref,
// NOTES.txt, a pre-install hook, a CRD, values overridden by a file at the
// repository's root, a Secret whose password randAlphaNum makes, and a
// ConfigMap that records now, lookup and getHostByName.
func helmChart() map[string]string {
	return map[string]string{
		"app/Chart.yaml":  "apiVersion: v2\nname: app\nversion: 1.2.3\ndependencies:\n- name: sub\n  version: 0.1.0\n",
		"app/values.yaml": "replicas: 1\nimage: nginx:1\nsub:\n  greeting: hello\n",
		"app/values.schema.json": `{"type": "object", "properties": {"replicas": {"$ref": "#/definitions/count"}},
 "definitions": {"count": {"type": "integer", "minimum": 0}}}`,
		"app/templates/_helpers.tpl": `{{- define "app.fullname" -}}{{ .Release.Name }}-{{ .Chart.Name }}{{- end -}}`,
		"app/templates/NOTES.txt":    "thanks for installing {{ .Release.Name }}\n",
		"app/templates/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "app.fullname" . }}
  namespace: {{ .Release.Namespace }}
spec:
  replicas: {{ .Values.replicas }}
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: web, image: {{ .Values.image | quote }}}
`,
		"app/templates/secret.yaml": `apiVersion: v1
kind: Secret
metadata:
  name: {{ include "app.fullname" . }}-db
stringData:
  password: {{ randAlphaNum 24 | quote }}
  id: {{ uuidv4 | quote }}
`,
		"app/templates/probe.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: probe
data:
  now: {{ now | date "2006-01-02T15:04:05Z07:00" | quote }}
  lookup: {{ lookup "v1" "Secret" "kube-system" "x" | toJson | quote }}
  host: {{ getHostByName "helm-tripwire.invalid" | quote }}
  version: {{ .Capabilities.KubeVersion.Version | quote }}
`,
		"app/templates/hook.yaml": `apiVersion: batch/v1
kind: Job
metadata:
  name: migrate
  annotations: {"helm.sh/hook": pre-install}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: m, image: busybox}]
`,
		"app/crds/widget.yaml":               "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.com\n",
		"app/charts/sub/Chart.yaml":          "apiVersion: v2\nname: sub\nversion: 0.1.0\n",
		"app/charts/sub/templates/cm.yaml":   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-sub\ndata:\n  greeting: {{ .Values.greeting }}\n",
		"app/charts/sub/templates/NOTES.txt": "sub notes\n",
		"prod.yaml":                          "replicas: 3\n",
		"image.yaml":                         "image: nginx:2\nreplicas: 4\n",
	}
}

func helmConfig(dir string, worker *Worker, seed []byte) Config {
	return Config{URL: dir, Path: "app", Worker: worker, Helm: Helm{
		HelmOptions: HelmOptions{Release: "web", Values: []string{"prod.yaml"}},
		Namespace:   "team",
		Seed:        func(context.Context) ([]byte, error) { return seed, nil },
		Capabilities: func(context.Context) (string, []string, error) {
			return "v1.37.2", []string{"v1", "apps/v1", "batch/v1"}, nil
		},
	}}
}

// byName indexes a render's objects by "Kind/name".
func byName(t *testing.T, ms []Manifest) map[string]Manifest {
	t.Helper()
	out := map[string]Manifest{}
	for _, m := range ms {
		out[m.Object.GetKind()+"/"+m.Object.GetName()] = m
	}
	return out
}

func TestHelmRender(t *testing.T) {
	dir := t.TempDir()
	files := helmChart()
	sha := newTestRepo(t, dir).commit(files)
	for _, worker := range []*Worker{nil, testWorker(t)} {
		t.Run(fmt.Sprintf("worker=%t", worker != nil), func(t *testing.T) {
			ms, err := mustNew(t, helmConfig(dir, worker, []byte("seed"))).Render(context.Background(), sha)
			if err != nil {
				t.Fatal(err)
			}
			got := byName(t, ms)
			want := []string{"ConfigMap/probe", "ConfigMap/web-sub", "Deployment/web-app", "Job/migrate", "Secret/web-app-db"}
			if d := cmp.Diff(want, sortedKeys(got)); d != "" {
				t.Fatalf("objects (-want +got), NOTES and CRDs left out:\n%s", d)
			}
			for k, m := range got {
				if m.Hook != (k == "Job/migrate") {
					t.Errorf("%s: Hook = %t; want true for the pre-install Job only", k, m.Hook)
				}
			}
			if f := got["Deployment/web-app"].File; f != "app/templates/deployment.yaml" {
				t.Errorf("the Deployment's file = %q, want its template", f)
			}
			d := got["Deployment/web-app"].Object.Object
			if r := d["spec"].(map[string]any)["replicas"]; r != int64(3) {
				t.Errorf("replicas = %v, want 3 from prod.yaml over values.yaml", r)
			}
			if ns := got["Deployment/web-app"].Object.GetNamespace(); ns != "team" {
				t.Errorf(".Release.Namespace = %q, want team", ns)
			}
			probe := got["ConfigMap/probe"].Object.Object["data"].(map[string]any)
			if probe["lookup"] != "{}" || probe["host"] != "" || probe["version"] != "v1.37.2" {
				t.Errorf("lookup, getHostByName, .Capabilities = %v; want {}, \"\", v1.37.2", probe)
			}
			if sub := got["ConfigMap/web-sub"].Object.Object["data"].(map[string]any); sub["greeting"] != "hello" {
				t.Errorf("the dependency's values: %v", sub)
			}
		})
	}
}

func sortedKeys(m map[string]Manifest) []string {
	k := make([]string, 0, len(m))
	for n := range maps.Keys(m) {
		k = append(k, n)
	}
	return sortStrings(k)
}

func sortStrings(s []string) []string {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s
}

// The same commit renders the same objects in every process with the same
// seed (in-process and in a worker, by two Sources); another seed makes
// other values; `now` is the commit's time; without a seed the random
// functions fail the render.
func TestHelmRepeatable(t *testing.T) {
	dir := t.TempDir()
	sha := newTestRepo(t, dir).commit(helmChart())
	render := func(worker *Worker, seed []byte) (map[string]any, error) {
		ms, err := mustNew(t, helmConfig(dir, worker, seed)).Render(context.Background(), sha)
		if err != nil {
			return nil, err
		}
		got := byName(t, ms)
		out := maps.Clone(got["Secret/web-app-db"].Object.Object["stringData"].(map[string]any))
		out["now"] = got["ConfigMap/probe"].Object.Object["data"].(map[string]any)["now"]
		return out, nil
	}
	a, err := render(nil, []byte("seed-1"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := render(testWorker(t), []byte("seed-1"))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(a, b); d != "" {
		t.Errorf("two renders of one commit with one seed differ (-in-process +worker):\n%s", d)
	}
	if p := a["password"].(string); len(p) != 24 {
		t.Errorf("password %q: want 24 characters", p)
	}
	c, err := render(nil, []byte("seed-2"))
	if err != nil {
		t.Fatal(err)
	}
	if a["password"] == c["password"] || a["id"] == c["id"] {
		t.Errorf("another seed made the same values: %v and %v", a, c)
	}
	if want := time.Unix(1_700_000_060, 0).UTC().Format(time.RFC3339); a["now"] != want {
		t.Errorf("now = %v, want the commit's time %s", a["now"], want)
	}
	if _, err := render(nil, nil); !errors.Is(err, ErrNoSeed) {
		t.Errorf("render without a seed: %v; want ErrNoSeed", err)
	}
}

// What cannot be rendered fails read with a *ManifestError naming it.
func TestHelmRenderErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change map[string]string
		values []string
		want   []string
	}{
		{"missing dependency", map[string]string{"app/Chart.yaml": "apiVersion: v2\nname: app\nversion: 1.0.0\ndependencies:\n- name: sub\n  version: 0.1.0\n- name: common\n  version: 2.0.0\n  repository: https://charts.example.com\n"},
			nil, []string{"app/Chart.yaml", "chart app", "common"}},
		{"missing values file", nil, []string{"nowhere.yaml"}, []string{"nowhere.yaml"}},
		{"invalid values file", map[string]string{"bad.yaml": "replicas: [\n"}, []string{"bad.yaml"}, []string{"bad.yaml"}},
		{"values against the schema", map[string]string{"neg.yaml": "replicas: -1\n"}, []string{"neg.yaml"}, []string{"schema", "app", "minimum"}},
		{"template error", map[string]string{"app/templates/bad.yaml": "{{ fail \"no\" }}\n"}, nil, []string{"bad.yaml", "no"}},
		{"apiVersion v3", map[string]string{"app/Chart.yaml": "apiVersion: v3\nname: app\nversion: 1.0.0\n"}, nil, []string{"v3"}},
		{"library chart", map[string]string{"app/Chart.yaml": "apiVersion: v2\nname: app\nversion: 1.0.0\ntype: library\n"}, nil, []string{"library"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			files := helmChart()
			maps.Copy(files, tc.change)
			sha := newTestRepo(t, dir).commit(files)
			cfg := helmConfig(dir, nil, []byte("seed"))
			if tc.values != nil {
				cfg.Helm.Values = tc.values
			}
			_, err := mustNew(t, cfg).Render(context.Background(), sha)
			var me *ManifestError
			if !errors.As(err, &me) {
				t.Fatalf("Render() error = %v; want a *ManifestError", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}

// Rendering a chart reaches no network, runs no process and resolves no
// name, whatever the chart holds: lookup, getHostByName, a schema $ref to
// a URL or a file, .Files outside the chart, a dependency with a
// repository URL. A fake helm and git first on PATH, a listener and a
// resolver that counts its queries record any attempt.
func TestHelmSealed(t *testing.T) {
	tw := newTripwire(t)
	var queries atomic.Int64
	saved := net.DefaultResolver
	net.DefaultResolver = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
		queries.Add(1)
		return nil, errors.New("no resolver here")
	}}
	t.Cleanup(func() { net.DefaultResolver = saved })

	url := "http://" + tw.addr + "/schema.json"
	cases := map[string]map[string]string{
		"lookup and DNS": {"app/templates/x.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: x}
data:
  a: {{ lookup "v1" "Namespace" "" "" | toJson | quote }}
  b: {{ getHostByName "` + tw.addr + `" | quote }}
  c: {{ getHostByName "tripwire.example.com" | quote }}
`},
		"files outside the chart": {"app/templates/x.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: x}
data:
  a: {{ .Files.Get "../prod.yaml" | quote }}
  b: {{ .Files.Get "/etc/passwd" | quote }}
  c: {{ .Files.Get "../../../../etc/passwd" | quote }}
`},
		"schema ref to a URL":      {"app/values.schema.json": `{"$ref": "` + url + `"}`},
		"schema ref to a file":     {"app/values.schema.json": `{"$ref": "file:///etc/passwd"}`},
		"schema ref relative":      {"app/values.schema.json": `{"$ref": "../../prod.yaml"}`},
		"schema $schema URL":       {"app/values.schema.json": `{"$schema": "` + url + `", "type": "object"}`},
		"dependency repository":    {"app/Chart.yaml": "apiVersion: v2\nname: app\nversion: 1.0.0\ndependencies:\n- name: sub\n  version: 0.1.0\n- name: far\n  version: 1.0.0\n  repository: " + "http://" + tw.addr + "\n"},
		"symlink out of the chart": {"app/templates/link.yaml": ""},
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			files := helmChart()
			maps.Copy(files, change)
			r := newTestRepo(t, dir)
			var sha string
			if name == "symlink out of the chart" {
				delete(files, "app/templates/link.yaml")
				sha = commitLinks(t, r, files, map[string]string{"app/templates/link.yaml": "/etc/passwd", "app/templates/up.yaml": "../../../../etc/passwd"})
			} else {
				sha = r.commit(files)
			}
			ms, err := mustNew(t, helmConfig(dir, nil, []byte("seed"))).Render(context.Background(), sha)
			t.Logf("objects %v, error %v", names(ms), err)
			if err == nil {
				x := byName(t, ms)["ConfigMap/x"].Object
				if x != nil && strings.Contains(fmt.Sprint(x.Object["data"]), "root:") {
					t.Errorf("a file outside the chart was read: %v", x.Object["data"])
				}
			} else if me := (*ManifestError)(nil); !errors.As(err, &me) {
				t.Errorf("Render() error = %v; want a *ManifestError or success", err)
			}
		})
	}
	tw.check(t)
	if n := queries.Load(); n != 0 {
		t.Errorf("the resolver was asked %d time(s), want never", n)
	}
}

// The fields a key or certificate maker made are named (found by rendering
// twice, with stand-ins the second time); the other objects have none.
func TestHelmGeneratedOnce(t *testing.T) {
	dir := t.TempDir()
	files := helmChart()
	files["app/templates/ca.yaml"] = `{{- $ca := genCA "shop-ca" 365 }}
apiVersion: v1
kind: Secret
metadata:
  name: ca
data:
  ca.crt: {{ $ca.Cert | b64enc | quote }}
`
	sha := newTestRepo(t, dir).commit(files)
	for _, worker := range []*Worker{nil, testWorker(t)} {
		ms, err := mustNew(t, helmConfig(dir, worker, []byte("seed"))).Render(context.Background(), sha)
		if err != nil {
			t.Fatal(err)
		}
		for k, m := range byName(t, ms) {
			want := [][]string(nil)
			if k == "Secret/ca" {
				want = [][]string{{"data", "ca.crt"}}
			}
			if d := cmp.Diff(want, m.Generated); d != "" {
				t.Errorf("worker=%t: %s: generated fields (-want +got):\n%s", worker != nil, k, d)
			}
		}
	}
}

// A kustomization's helmCharts are rendered by the same engine, from the
// chart vendored under helmGlobals.chartHome (default charts/), with
// valuesInline and additionalValuesFiles, and kustomize transforms the
// output like any resource (namePrefix). Hooks are ordinary objects there,
// as with `kustomize build --enable-helm`. The seed is asked for only when
// a random function needs it.
func TestKustomizeHelmCharts(t *testing.T) {
	files := map[string]string{
		"k/kustomization.yaml": `namePrefix: team-
resources: [extra.yaml]
helmCharts:
- name: app
  releaseName: web
  valuesInline:
    replicas: 5
    image: nginx:2
  additionalValuesFiles: [prod.yaml]
`,
		"k/extra.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n",
		"k/prod.yaml":  "replicas: 3\n",
	}
	for p, c := range helmChart() {
		if strings.HasPrefix(p, "app/") {
			files["k/charts/"+p] = c
		}
	}
	dir := t.TempDir()
	sha := newTestRepo(t, dir).commit(files)
	seeds := 0
	for _, worker := range []*Worker{nil, testWorker(t)} {
		t.Run(fmt.Sprintf("worker=%t", worker != nil), func(t *testing.T) {
			cfg := helmConfig(dir, worker, []byte("seed"))
			cfg.Path, cfg.Helm.Values = "k", nil
			cfg.Helm.Seed = func(context.Context) ([]byte, error) { seeds++; return []byte("seed"), nil }
			ms, err := mustNew(t, cfg).Render(context.Background(), sha)
			if err != nil {
				t.Fatal(err)
			}
			got := byName(t, ms)
			want := []string{"ConfigMap/team-extra", "ConfigMap/team-probe", "ConfigMap/team-web-sub", "Deployment/team-web-app", "Job/team-migrate", "Secret/team-web-app-db"}
			if d := cmp.Diff(want, sortedKeys(got)); d != "" {
				t.Fatalf("objects (-want +got):\n%s", d)
			}
			d := got["Deployment/team-web-app"].Object.Object
			if r := d["spec"].(map[string]any)["replicas"]; r != int64(3) {
				t.Errorf("replicas = %v, want 3 (prod.yaml over valuesInline over values.yaml)", r)
			}
			if img := fmt.Sprint(d["spec"]); !strings.Contains(img, "nginx:2") {
				t.Errorf("valuesInline image not applied: %s", img)
			}
		})
	}
	if seeds != 2 {
		t.Errorf("the seed was asked for %d times, want 2 (once per Source: the chart uses randAlphaNum)", seeds)
	}
}

// What a kustomization's helmCharts may not do fails read, naming it: a
// chart that is not vendored (a repo to download from), a chart home
// outside the repository, the old helmChartInflationGenerator form.
func TestKustomizeHelmChartsRefused(t *testing.T) {
	for name, kust := range map[string]string{
		"not vendored":       "helmCharts:\n- name: redis\n  repo: https://charts.example.com\n  version: 1.0.0\n",
		"chart home outside": "helmGlobals:\n  chartHome: ../../..\nhelmCharts:\n- name: app\n",
		"config home":        "helmGlobals:\n  configHome: /tmp/helm\nhelmCharts:\n- name: app\n",
		"old form":           "helmChartInflationGenerator:\n- chartName: app\n",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			files := map[string]string{"k/kustomization.yaml": kust}
			for p, c := range helmChart() {
				if strings.HasPrefix(p, "app/") {
					files["k/charts/"+p] = c
				}
			}
			sha := newTestRepo(t, dir).commit(files)
			cfg := helmConfig(dir, nil, []byte("seed"))
			cfg.Path = "k"
			_, err := mustNew(t, cfg).Render(context.Background(), sha)
			var me *ManifestError
			if !errors.As(err, &me) {
				t.Fatalf("Render() error = %v; want a *ManifestError", err)
			}
			t.Log(err)
		})
	}
}

// A chart's render is bounded like kustomize's: a template that never ends
// is stopped at the render's deadline (its worker killed) and the next
// render runs at once; output counts against MaxObjects and MaxBytes; a
// tpl that calls itself ends the worker, not the caller.
func TestHelmRenderBounded(t *testing.T) {
	dir := t.TempDir()
	repo := newTestRepo(t, dir)
	base := helmChart()
	commit := func(extra map[string]string) string {
		files := maps.Clone(base)
		maps.Copy(files, extra)
		return repo.commit(files)
	}
	endless := commit(map[string]string{"app/templates/spin.yaml": "{{- range until 100000 }}{{- range until 100000 }}{{- end }}{{- end }}\n"})
	many := commit(map[string]string{"app/templates/spin.yaml": "", "app/templates/many.yaml": "{{- range until 500 }}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: m{{ . }}\n{{- end }}\n"})
	recursive := commit(map[string]string{"app/templates/many.yaml": "", "app/values.yaml": "replicas: 1\nimage: nginx:1\nsub:\n  greeting: hello\nx: '{{ tpl .Values.x . }}'\n",
		"app/templates/loop.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: loop\ndata:\n  x: {{ tpl .Values.x . | quote }}\n"})
	good := commit(map[string]string{"app/templates/loop.yaml": "", "app/values.yaml": base["app/values.yaml"]})

	w := &Worker{Path: testWorker(t).Path, MaxMemory: 256 << 20}
	s := mustNew(t, helmConfig(dir, w, []byte("seed")))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_, err := s.Render(ctx, endless)
	cancel()
	if !errors.Is(err, ErrRenderKilled) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a template that never ends: %v; want its worker killed at the deadline", err)
	}
	if _, err := s.Render(context.Background(), good); err != nil {
		t.Fatalf("the next revision: %v", err)
	}

	limited := helmConfig(dir, w, []byte("seed"))
	limited.Limits = Limits{MaxObjects: 100}
	var le *LimitError
	if _, err := mustNew(t, limited).Render(context.Background(), many); !errors.As(err, &le) || le.Limit != LimitObjects {
		t.Errorf("500 objects under a limit of 100: %v; want a LimitError of %s", err, LimitObjects)
	}
	limited.Limits = Limits{MaxBytes: 20 << 10}
	if _, err := mustNew(t, limited).Render(context.Background(), many); !errors.As(err, &le) || le.Limit != LimitBytes {
		t.Errorf("500 objects under 20 KiB: %v; want a LimitError of %s", err, LimitBytes)
	}

	_, err = s.Render(context.Background(), recursive)
	if err == nil || errors.Is(err, ErrRenderKilled) {
		t.Errorf("a tpl that calls itself: %v; want the render to fail by itself", err)
	}
	t.Logf("a tpl that calls itself: %v", err)
	if _, err := s.Render(context.Background(), good); err != nil {
		t.Fatalf("after the recursive chart: %v", err)
	}
}

// A value the schema refuses is never quoted: the error names where and
// which keyword (a values file may hold a password).
func TestHelmSchemaErrorQuotesNoValue(t *testing.T) {
	dir := t.TempDir()
	files := helmChart()
	files["app/values.schema.json"] = `{"type": "object", "properties": {"password": {"type": "string", "pattern": "^[a-z]+$"}}}`
	files["secret.yaml"] = "password: Hunter2-Secret-Value\n"
	sha := newTestRepo(t, dir).commit(files)
	cfg := helmConfig(dir, nil, []byte("seed"))
	cfg.Helm.Values = []string{"secret.yaml"}
	_, err := mustNew(t, cfg).Render(context.Background(), sha)
	if err == nil || strings.Contains(err.Error(), "Hunter2") || !strings.Contains(err.Error(), "/password") || !strings.Contains(err.Error(), "pattern") {
		t.Fatalf("Render() error = %v; want the field and the keyword, not the value", err)
	}
}
