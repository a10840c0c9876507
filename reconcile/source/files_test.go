package source

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"recond.dev/recond/reconcile/source/helm"
	"recond.dev/recond/reconcile/source/kustomize"
	"recond.dev/recond/reconcile/source/render"
)

// TestRenderersReadAnySource: the renderers read a revision only through
// Dir and File, so a file tree of another source (an unpacked artifact,
// here the worktree through FSDir) renders to the same objects as the
// commit's Git tree: plain files with a link, a kustomization and a chart.
func TestRenderersReadAnySource(t *testing.T) {
	dir := t.TempDir()
	files := helmChart()
	files["plain/a.yaml"] = cm("a")
	files["plain/sub/b.yaml"] = cm("b")
	files["plain/.hidden/c.yaml"] = cm("c")
	files["shared/d.yaml"] = cm("d")
	files["kust/kustomization.yaml"] = "resources:\n- cm.yaml\nnamePrefix: k-\n"
	files["kust/cm.yaml"] = cm("e")
	repo := newTestRepo(t, dir)
	repo.commit(files)
	if err := os.Symlink("../shared/d.yaml", filepath.Join(dir, "plain", "d.yaml")); err != nil {
		t.Fatal(err)
	}
	sha := repo.commit(nil)
	ctx := context.Background()
	s := mustNew(t, helmConfig(dir, nil, []byte("seed")))
	tr, err := s.f.Open(sha)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	now, gitRoot := tr.Time, tr.Root
	fsRoot := FSDir(os.DirFS(dir))

	renderers := map[string]func(root Dir) (any, error){
		"plain": func(root Dir) (any, error) {
			sub, err := root.Dir("plain")
			if err != nil {
				return nil, err
			}
			ms, err := render.Plain(ctx, root, sub, "plain", render.NewBudget(DefaultLimits))
			return names(ms), err
		},
		"kustomize": func(root Dir) (any, error) {
			out, err := kustomize.Build(ctx, root, "kust", render.NewBudget(DefaultLimits), helm.Request{})
			return string(out), err
		},
		"helm": func(root Dir) (any, error) {
			req, err := s.helmRequest(ctx, now)
			if err != nil {
				return nil, err
			}
			var out []byte
			_, err = s.withSeed(ctx, &req, func() (*Result, error) {
				var err error
				out, err = helm.Build(ctx, root, "app", render.NewBudget(DefaultLimits), helm.Request{Request: req})
				return &Result{}, err
			})
			return string(out), err
		},
	}
	for name, r := range renderers {
		t.Run(name, func(t *testing.T) {
			want, err := r(gitRoot)
			if err != nil {
				t.Fatalf("from the Git tree: %v", err)
			}
			got, err := r(fsRoot)
			if err != nil {
				t.Fatalf("from the file tree: %v", err)
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("the file tree renders otherwise than the Git tree (-git +files):\n%s", d)
			}
		})
	}
	ms, _ := renderers["plain"](fsRoot)
	if d := cmp.Diff([]string{"plain/a.yaml ConfigMap/a", "plain/d.yaml ConfigMap/d", "plain/sub/b.yaml ConfigMap/b"}, ms); d != "" {
		t.Errorf("plain objects (-want +got), the link followed and .hidden skipped:\n%s", d)
	}
}
