package source

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"recond.dev/recond/reconcile/source/render"
)

// aliasBomb is a ConfigMap whose YAML expands to 9^levels nodes.
func aliasBomb(levels int) string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bomb\nx0: &a0 [lol,lol,lol,lol,lol,lol,lol,lol,lol]\n")
	for i := 1; i < levels; i++ {
		p := fmt.Sprintf("*a%d", i-1)
		fmt.Fprintf(&b, "x%d: &a%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(p+",", 9), ","))
	}
	return b.String()
}

// nested is a ConfigMap nested depth maps deep under data.
func nested(depth int) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: deep\nspec: " +
		strings.Repeat("{a: ", depth) + "1" + strings.Repeat("}", depth) + "\n"
}

func kust(resources ...string) string {
	return "resources:\n- " + strings.Join(resources, "\n- ") + "\n"
}

func TestRenderLimits(t *testing.T) {
	big := cm("big") + "  pad: " + strings.Repeat("x", 2000) + "\n"
	files := map[string]string{
		"bytes/a.yaml":   cm("a") + "  pad: " + strings.Repeat("x", 600) + "\n",
		"bytes/b.yaml":   cm("b") + "  pad: " + strings.Repeat("x", 600) + "\n",
		"objects/a.yaml": cm("a") + "---\n" + cm("b") + "---\n" + cm("c"),
		"file/big.yaml":  big,
		"depth/d.yaml":   nested(20),
		"bomb7/b.yaml":   aliasBomb(7),
		"bomb10/b.yaml":  aliasBomb(10),
	}
	for _, d := range []string{"bytes", "objects", "file", "depth", "bomb7", "bomb10"} {
		files["k"+d+"/kustomization.yaml"] = kust("../" + d)
	}
	// kustomize needs a kustomization in each base directory.
	for _, d := range []string{"bytes", "objects", "file", "depth", "bomb7", "bomb10"} {
		var list []string
		for name := range files {
			if dir, f, _ := strings.Cut(name, "/"); dir == d {
				list = append(list, f)
			}
		}
		files["kb"+d+"/kustomization.yaml"] = kust(strings.Join(list, "\n- "))
		for _, f := range list {
			files["kb"+d+"/"+f] = files[d+"/"+f]
		}
	}
	dir := t.TempDir()
	sha := newTestRepo(t, dir).commit(files)

	tests := []struct {
		path   string
		limits Limits
		want   string
	}{
		{"bytes", Limits{MaxBytes: 1000}, LimitBytes},
		{"objects", Limits{MaxObjects: 2}, LimitObjects},
		{"kbobjects", Limits{MaxObjects: 2}, LimitObjects},
		{"file", Limits{MaxFileBytes: 1000}, LimitFileBytes},
		{"kbfile", Limits{MaxFileBytes: 1000}, LimitFileBytes},
		{"depth", Limits{MaxDepth: 10}, LimitDepth},
		{"kbdepth", Limits{MaxDepth: 10}, LimitDepth},
		{"bomb7", Limits{}, LimitAliasExpansion},
		{"kbbomb7", Limits{}, LimitAliasExpansion},
		{"bomb10", Limits{}, LimitAliasExpansion},
		{"kbbomb10", Limits{}, LimitAliasExpansion},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			s := mustNew(t, Config{URL: dir, Path: tt.path, Limits: tt.limits})
			ms, err := s.Render(context.Background(), sha)
			var le *LimitError
			var me *ManifestError
			if !errors.As(err, &le) || !errors.As(err, &me) {
				t.Fatalf("Render() = %v, %v; want a *LimitError in a *ManifestError", names(ms), err)
			}
			if le.Limit != tt.want || le.Flag != render.LimitFlag(tt.want) || !strings.Contains(err.Error(), le.Flag) {
				t.Errorf("LimitError = %+v (%q), want limit %q with its flag", le, err, tt.want)
			}
			// Within the default limits (and for the bombs, never) it renders.
			if tt.want != LimitAliasExpansion {
				if _, err := mustNew(t, Config{URL: dir, Path: tt.path}).Render(context.Background(), sha); err != nil {
					t.Errorf("Render() with default limits: %v", err)
				}
			}
		})
	}
	// The bound on rendered output, for kustomize.
	s := mustNew(t, Config{URL: dir, Path: "kbbytes", Limits: Limits{MaxBytes: 1000}})
	var le *LimitError
	if _, err := s.Render(context.Background(), sha); !errors.As(err, &le) || le.Limit != LimitBytes {
		t.Errorf("kustomize Render() = %v, want a bytes LimitError", err)
	}
}

func TestRenderAliasesWithinLimit(t *testing.T) {
	// A few anchors, as real files use them, are fine.
	doc := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: anchors\n  labels: &l {app: web, tier: front}\n  annotations: *l\ndata: {a: x}\n"
	dir := t.TempDir()
	sha := newTestRepo(t, dir).commit(map[string]string{"p/a.yaml": doc, "k/kustomization.yaml": kust("../p/a.yaml"), "k/x.yaml": doc})
	for _, p := range []string{"p"} {
		if _, err := mustNew(t, Config{URL: dir, Path: p}).Render(context.Background(), sha); err != nil {
			t.Errorf("Render(%s) = %v", p, err)
		}
	}
}

func TestRenderNumbers(t *testing.T) {
	deploy := func(replicas string) string {
		return "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: " + replicas + "\n"
	}
	dir := t.TempDir()
	sha := newTestRepo(t, dir).commit(map[string]string{
		"big/d.yaml":              deploy("99999999999999999999999999999"),
		"uint/d.yaml":             deploy("9223372036854775808"),
		"float/d.yaml":            deploy("0.10000000000000000000001"),
		"huge/d.yaml":             deploy("1e400"),
		"json/d.json":             `{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 99999999999999999999999999999}}`,
		"list/l.yaml":             "apiVersion: v1\nkind: List\nitems:\n- " + strings.ReplaceAll(deploy("99999999999999999999999999999"), "\n", "\n  "),
		"kust/kustomization.yaml": kust("d.yaml"),
		"kust/d.yaml":             deploy("99999999999999999999999999999"),
		"ok/d.yaml":               deploy("9223372036854775807") + "  x: 0.1\n  y: 1e3\n  z: -2.5e-3\n  s: \"99999999999999999999999999999\"\n",
	})
	tests := []struct{ path, file, object, field string }{
		{"big", "big/d.yaml", "Deployment/web", "spec.replicas"},
		{"uint", "uint/d.yaml", "Deployment/web", "spec.replicas"},
		{"float", "float/d.yaml", "Deployment/web", "spec.replicas"},
		{"json", "json/d.json", "Deployment/web", "spec.replicas"},
		{"list", "list/l.yaml", "Deployment/web", "spec.replicas"},
		{"kust", "", "Deployment/web", "spec.replicas"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			_, err := mustNew(t, Config{URL: dir, Path: tt.path}).Render(context.Background(), sha)
			var me *ManifestError
			if !errors.As(err, &me) {
				t.Fatalf("Render() error = %v, want a *ManifestError", err)
			}
			if (tt.file != "" && me.File != tt.file) || me.Object != tt.object || !strings.Contains(me.Err.Error(), tt.field+": number") {
				t.Errorf("ManifestError{File: %q, Object: %q, Err: %q}, want {%q, %q, %s: number ...}", me.File, me.Object, me.Err, tt.file, tt.object, tt.field)
			}
		})
	}
	ms, err := mustNew(t, Config{URL: dir, Path: "ok"}).Render(context.Background(), sha)
	if err != nil {
		t.Fatal(err)
	}
	if got := ms[0].Object.Object["spec"].(map[string]any)["replicas"]; got != int64(9223372036854775807) {
		t.Errorf("replicas = %#v", got)
	}
}

// commitLinks adds symbolic links (name -> target) to the repository and
// commits them with everything else in files.
func commitLinks(t *testing.T, r *testRepo, files, links map[string]string) string {
	t.Helper()
	for name, target := range links {
		p := filepath.Join(r.dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	return r.commit(files)
}

func TestRenderSymlinks(t *testing.T) {
	dir := t.TempDir()
	r := newTestRepo(t, dir)
	sha := commitLinks(t, r, map[string]string{
		"target/cm.yaml":             cm("linked"),
		"in/own.yaml":                cm("own"),
		"out/own.yaml":               cm("own"),
		"dangle/own.yaml":            cm("own"),
		"abs/own.yaml":               cm("own"),
		"dirlink/own.yaml":           cm("own"),
		"kin/kustomization.yaml":     kust("link.yaml"),
		"kout/kustomization.yaml":    kust("link.yaml"),
		"kdangle/kustomization.yaml": kust("link.yaml"),
		"kbase/kustomization.yaml":   kust("base"),
		"unread/own.yaml":            cm("own"),
	}, map[string]string{
		"in/link.yaml":      "../target/cm.yaml",
		"in/chain.yaml":     "link.yaml",
		"out/link.yaml":     "../../outside.yaml",
		"dangle/link.yaml":  "../target/nothing.yaml",
		"abs/link.yaml":     "/etc/passwd",
		"dirlink/sub":       "../target",
		"kin/link.yaml":     "../target/cm.yaml",
		"kout/link.yaml":    "../../../etc/passwd",
		"kdangle/link.yaml": "nothing.yaml",
		"kbase/base":        "../kin",
		"unread/loop.yaml":  "loop.yaml",
	})
	good := []struct {
		path string
		want []string
	}{
		{"in", []string{"in/chain.yaml ConfigMap/linked", "in/link.yaml ConfigMap/linked", "in/own.yaml ConfigMap/own"}},
		{"kin", []string{"kustomize build kin ConfigMap/linked"}},
		{"kbase", []string{"kustomize build kbase ConfigMap/linked"}},
	}
	for _, tt := range good {
		t.Run(tt.path, func(t *testing.T) {
			ms, err := mustNew(t, Config{URL: dir, Path: tt.path}).Render(context.Background(), sha)
			if err != nil {
				t.Fatal(err)
			}
			if got := names(ms); strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("Render() = %q, want %q", got, tt.want)
			}
		})
	}
	bad := []struct{ path, file, contains string }{
		{"out", "out/link.yaml", "outside the repository"},
		{"dangle", "dangle/link.yaml", "dangling"},
		{"abs", "abs/link.yaml", "outside the repository"},
		{"dirlink", "dirlink/sub", "directory"},
		{"kout", "kout/kustomization.yaml", "kout/link.yaml -> ../../../etc/passwd: outside the repository"},
		{"kdangle", "kdangle/kustomization.yaml", "dangling"},
		{"unread", "unread/loop.yaml", "too many levels"},
	}
	for _, tt := range bad {
		t.Run(tt.path, func(t *testing.T) {
			ms, err := mustNew(t, Config{URL: dir, Path: tt.path}).Render(context.Background(), sha)
			var me *ManifestError
			if !errors.As(err, &me) {
				t.Fatalf("Render() = %v, %v; want a *ManifestError", names(ms), err)
			}
			if me.File != tt.file || !strings.Contains(me.Error(), tt.contains) {
				t.Errorf("ManifestError = %q (File %q), want File %q containing %q", me, me.File, tt.file, tt.contains)
			}
		})
	}
}

func TestRenderStopsWhenCancelled(t *testing.T) {
	files := map[string]string{}
	var res []string
	for i := range 3000 {
		name := fmt.Sprintf("cm%04d.yaml", i)
		files["big/"+name] = cm(fmt.Sprintf("c%d", i)) + "  pad: " + strings.Repeat("y", 2000) + "\n"
		res = append(res, "../big/"+name)
	}
	files["k/kustomization.yaml"] = kust(res...)
	dir := t.TempDir()
	sha := newTestRepo(t, dir).commit(files)
	for _, tc := range []struct {
		path   string
		worker *Worker
	}{{"k", nil}, {"k", testWorker(t)}, {"big", nil}} {
		t.Run(fmt.Sprintf("%s/worker=%t", tc.path, tc.worker != nil), func(t *testing.T) {
			s := mustNew(t, Config{URL: dir, Path: tc.path, Worker: tc.worker})
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(300*time.Millisecond, cancel)
			// A hang guard, not a bound: a render that ignored the
			// cancellation would read all 6 MB and succeed.
			done := make(chan error, 1)
			go func() { _, err := s.Render(ctx, sha); done <- err }()
			var err error
			select {
			case err = <-done:
			case <-time.After(time.Minute):
				t.Fatal("Render() still running a minute after it was cancelled")
			}
			if err == nil {
				t.Skip("render finished before it could be cancelled")
			}
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Render() error = %v, want context.Canceled", err)
			}
		})
	}
}
