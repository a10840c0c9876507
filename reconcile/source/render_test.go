package source

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
)

// renderFixture is one commit holding a directory per render case.
func renderFixture(t *testing.T) (dir, sha string) {
	dir = t.TempDir()
	r := newTestRepo(t, dir)
	sha = r.commit(map[string]string{
		// Plain manifests: multi-document YAML, JSON, recursion, ordering.
		"plain/b.yaml": `# leading comment
apiVersion: v1
kind: ConfigMap
metadata:
  name: b1
data:
  k: v
---
# a document with only a comment
---
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: b2
  namespace: explicit
`,
		"plain/a.json": `{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc"},
 "spec": {"ports": [{"port": 80}]}}`,
		"plain/sub/c.yml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 3
`,
		"plain/sub/empty.yaml":  "# nothing here\n",
		"plain/README.md":       "not a manifest",
		"plain/.github/ci.yaml": "name: ci\non: push\n",
		"plain/notes.txt":       "kind: nope",
		"outside.yaml":          cm("outside"),
		"list/list.yaml": `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: i1}
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: i2}
`,
		"list/cms.yaml": `{"apiVersion": "v1", "kind": "ConfigMapList", "items": [
  {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "i3"}}]}`,
		"list/empty.yaml":                       "apiVersion: v1\nkind: List\nitems: []\n",
		"broken/ok.yaml":                        cm("fine"),
		"broken/sub/bad.yaml":                   cm("first") + "---\nmetadata: {name: [unclosed\n",
		"nokind/x.yaml":                         "apiVersion: v1\nmetadata:\n  name: web\n",
		"noname/x.yaml":                         "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n",
		"nothing/x.yaml":                        "foo: bar\n",
		"scalar/x.yaml":                         "just a string\n",
		"badlist/x.yaml":                        "apiVersion: v1\nkind: List\nitems:\n- 42\n",
		"kust/base/kustomization.yaml":          "resources:\n- cm.yaml\n",
		"kust/base/cm.yaml":                     cm("cfg"),
		"kust/overlays/prod/kustomization.yaml": "resources:\n- ../../base\n- extra.yaml\nnamePrefix: prod-\n",
		"kust/overlays/prod/extra.yaml":         cm("extra"),
		"kust/overlays/prod/ignored.yaml":       cm("not-listed"),
		"kust/yml/kustomization.yml":            "resources:\n- ../base\nnameSuffix: -y\n",
		"kust/remote/kustomization.yaml":        "resources:\n- ../local\n",
		"kust/local/kustomization.yaml":         "resources:\n- github.com/example/repo//deploy?ref=v1\n",
		"kust/http/kustomization.yaml":          "resources:\n- https://example.com/cm.yaml\n",
		"kust/broken/kustomization.yaml":        "resources:\n- missing.yaml\n",
		"kust/escape/kustomization.yaml":        "resources:\n- ../base/cm.yaml\n",
	})
	return dir, sha
}

func TestRender(t *testing.T) {
	dir, sha := renderFixture(t)
	tests := []struct {
		path string
		want []string
	}{
		{"plain", []string{
			"plain/a.json Service/svc",
			"plain/b.yaml ConfigMap/b1",
			"plain/b.yaml ConfigMap/b2",
			"plain/sub/c.yml Deployment/web",
		}},
		{"plain/sub", []string{"plain/sub/c.yml Deployment/web"}},
		{"list", []string{
			"list/cms.yaml ConfigMap/i3",
			"list/list.yaml ConfigMap/i1",
			"list/list.yaml ConfigMap/i2",
		}},
		{"kust/overlays/prod", []string{
			"kustomize build kust/overlays/prod ConfigMap/prod-cfg",
			"kustomize build kust/overlays/prod ConfigMap/prod-extra",
		}},
		{"kust/yml", []string{"kustomize build kust/yml ConfigMap/cfg-y"}},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			s := mustNew(t, Config{URL: dir, Path: tt.path})
			ms, err := s.Render(context.Background(), sha)
			if err != nil {
				t.Fatal(err)
			}
			if got := names(ms); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Render() =\n  %q\nwant\n  %q", got, tt.want)
			}
		})
	}
}

func TestRenderKeepsObjectsAsWritten(t *testing.T) {
	dir, sha := renderFixture(t)
	ms, err := mustNew(t, Config{URL: dir, Path: "plain"}).Render(context.Background(), strings.ToUpper(sha))
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]Manifest{}
	for _, m := range ms {
		byName[m.Object.GetName()] = m
	}
	if ns := byName["b1"].Object.GetNamespace(); ns != "" {
		t.Errorf("b1 namespace = %q, want none added", ns)
	}
	if ns := byName["b2"].Object.GetNamespace(); ns != "explicit" {
		t.Errorf("b2 namespace = %q, want explicit", ns)
	}
	if got := byName["b1"].Object.Object["data"]; !reflect.DeepEqual(got, map[string]any{"k": "v"}) {
		t.Errorf("b1 data = %v", got)
	}
	// Integers are int64, as Unstructured requires (DeepCopy panics on int
	// and float64 would change the value's type).
	if got := byName["web"].Object.Object["spec"].(map[string]any)["replicas"]; got != int64(3) {
		t.Errorf("replicas = %#v, want int64(3)", got)
	}
	port := byName["svc"].Object.Object["spec"].(map[string]any)["ports"].([]any)[0].(map[string]any)["port"]
	if port != int64(80) {
		t.Errorf("JSON port = %#v, want int64(80)", port)
	}
	_ = byName["web"].Object.DeepCopy()

	// The root of the repository works too and sees everything.
	ms, err = mustNew(t, Config{URL: dir, Path: "/"}).Render(context.Background(), sha)
	if err == nil || len(ms) != 0 {
		t.Fatalf("Render(root) = %d manifests, %v; want an error (the fixture has broken files)", len(ms), err)
	}
}

func TestRenderErrors(t *testing.T) {
	dir, sha := renderFixture(t)
	tests := []struct {
		path       string
		file       string // ManifestError.File
		object     string // ManifestError.Object
		errContain string
	}{
		{"broken", "broken/sub/bad.yaml", "", "document 2"},
		{"nokind", "nokind/x.yaml", "web", "missing kind"},
		{"noname", "noname/x.yaml", "ConfigMap", "missing metadata.name"},
		{"nothing", "nothing/x.yaml", "", "missing apiVersion, kind, metadata.name"},
		{"scalar", "scalar/x.yaml", "", "not an object"},
		{"badlist", "badlist/x.yaml", "List", "item 0 is not an object"},
		{"no/such/dir", "no/such/dir", "", "directory not found"},
		{"kust/remote", "kust/local/kustomization.yaml", "", `resources entry "github.com/example/repo//deploy?ref=v1": remote references are not supported`},
		{"kust/http", "kust/http/kustomization.yaml", "", `resources entry "https://example.com/cm.yaml": remote references`},
		{"kust/broken", "kust/broken/kustomization.yaml", "", `resources entry "missing.yaml": no such file`},
		{"kust/escape", "kustomize build kust/escape", "", "security"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			s := mustNew(t, Config{URL: dir, Path: tt.path})
			ms, err := s.Render(context.Background(), sha)
			var me *ManifestError
			if !errors.As(err, &me) {
				t.Fatalf("Render() = %v, %v; want a *ManifestError", names(ms), err)
			}
			if me.File != tt.file || me.Object != tt.object || !strings.Contains(me.Err.Error(), tt.errContain) {
				t.Errorf("ManifestError{File: %q, Object: %q, Err: %q}, want {%q, %q, containing %q}",
					me.File, me.Object, me.Err, tt.file, tt.object, tt.errContain)
			}
			if !strings.Contains(err.Error(), me.Error()) || !strings.HasPrefix(err.Error(), "render "+dir) {
				t.Errorf("error %q does not carry the render context", err)
			}
		})
	}
}

func TestManifestErrorFormat(t *testing.T) {
	inner := errors.New("boom")
	e := &ManifestError{File: "a.yaml", Object: "ConfigMap/x", Err: inner}
	if e.Error() != "a.yaml: ConfigMap/x: boom" || !errors.Is(e, inner) {
		t.Errorf("Error() = %q, Is(inner) = %v", e.Error(), errors.Is(e, inner))
	}
	if e := (&ManifestError{File: "a.yaml", Err: inner}); e.Error() != "a.yaml: boom" {
		t.Errorf("Error() without object = %q", e.Error())
	}
}

func TestRenderBadCommit(t *testing.T) {
	dir, sha := renderFixture(t)
	s := mustNew(t, Config{URL: dir})
	if _, err := s.Render(context.Background(), "main"); err == nil || !strings.Contains(err.Error(), "not a full commit SHA") {
		t.Errorf("Render(main) error = %v", err)
	}
	if _, err := s.Render(context.Background(), strings.Repeat("ab", 20)); !errors.Is(err, plumbing.ErrObjectNotFound) {
		t.Errorf("Render(unknown SHA) error = %v, want ErrObjectNotFound", err)
	}
	remote := mustNew(t, Config{URL: "https://example.com/r", CacheDir: t.TempDir()})
	if _, err := remote.Render(context.Background(), strings.Repeat("ab", 20)); err == nil || !strings.Contains(err.Error(), "Fetch first") {
		t.Errorf("Render() before Fetch error = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := mustNew(t, Config{URL: dir, Path: "plain"}).Render(ctx, sha); !errors.Is(err, context.Canceled) {
		t.Errorf("Render(canceled) error = %v, want context.Canceled", err)
	}
}

func TestRenderKustomizationAtRoot(t *testing.T) {
	dir := t.TempDir()
	r := newTestRepo(t, dir)
	sha := r.commit(map[string]string{
		"Kustomization":          "resources:\n- app\ncommonLabels:\n  team: a\n",
		"app/kustomization.yaml": "resources:\n- cm.yaml\n",
		"app/cm.yaml":            cm("cfg"),
		"app/stray.yaml":         "not: a manifest\n", // not listed, so not read
	})
	ms, err := mustNew(t, Config{URL: dir}).Render(context.Background(), sha)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(ms); len(got) != 1 || got[0] != "kustomize build . ConfigMap/cfg" {
		t.Fatalf("Render() = %q", got)
	}
	if l := ms[0].Object.GetLabels()["team"]; l != "a" {
		t.Errorf("label team = %q, want a", l)
	}
}
