package source

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
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
	gitRepo, gitRoot, _, err := s.tree(sha)
	if err != nil {
		t.Fatal(err)
	}
	fsRoot := FSDir(os.DirFS(dir))

	render := map[string]func(root Dir) (any, error){
		"plain": func(root Dir) (any, error) {
			sub, err := root.Dir("plain")
			if err != nil {
				return nil, err
			}
			ms, err := readDir(ctx, root, sub, "plain", &budget{lim: DefaultLimits})
			return names(ms), err
		},
		"kustomize": func(root Dir) (any, error) {
			out, err := kustomizeBuild(ctx, root, "kust", &budget{lim: DefaultLimits}, helmRequest{})
			return string(out), err
		},
		"helm": func(root Dir) (any, error) {
			req, err := s.helmRequest(ctx, gitRepo, sha)
			if err != nil {
				return nil, err
			}
			out, err := s.withSeed(ctx, &req, func() ([]byte, error) {
				return helmBuild(ctx, root, "app", &budget{lim: DefaultLimits}, req)
			})
			return string(out), err
		},
	}
	for name, r := range render {
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
	ms, _ := render["plain"](fsRoot)
	if d := cmp.Diff([]string{"plain/a.yaml ConfigMap/a", "plain/d.yaml ConfigMap/d", "plain/sub/b.yaml ConfigMap/b"}, ms); d != "" {
		t.Errorf("plain objects (-want +got), the link followed and .hidden skipped:\n%s", d)
	}
}

// TestFSDirLinksStayInside: through FSDir as through Git, a link that
// leaves the tree fails, naming it.
func TestFSDirLinksStayInside(t *testing.T) {
	fsys := fstest.MapFS{
		"m/a.yaml":   {Data: []byte(cm("a"))},
		"m/out.yaml": {Data: []byte("../../etc/passwd"), Mode: os.ModeSymlink},
	}
	root := FSDir(fsys)
	sub, err := root.Dir("m")
	if err != nil {
		t.Fatal(err)
	}
	_, err = readDir(context.Background(), root, sub, "m", &budget{lim: DefaultLimits})
	if err == nil || !strings.Contains(err.Error(), "m/out.yaml") || !strings.Contains(err.Error(), "outside the repository") {
		t.Fatalf("a link out of the tree: %v, want an error naming it", err)
	}
}
