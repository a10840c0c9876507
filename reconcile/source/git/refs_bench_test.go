package git

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/internal/testenv/tools"
)

// gitRun runs the git binary in dir (the test is skipped without it) and
// returns its trimmed output. Only the tests run git: recond never does.
func gitRun(tb testing.TB, dir string, args ...string) string {
	tb.Helper()
	cmd := exec.Command(tools.Find(tb, tools.Git), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=test", "GIT_AUTHOR_EMAIL=test@example.com",
		"GIT_COMMITTER_NAME=test", "GIT_COMMITTER_EMAIL=test@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		tb.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// layoutRepo is a repository of files manifests in the layout a
// benchmark or a test names: its refs loose or packed, its objects loose
// or packed, and a few more branches and tags beside main, as a real
// repository has.
type layoutRepo struct {
	dir string // the work tree
	sha string // main's commit
}

type layout struct {
	files       int
	packedRefs  bool // git pack-refs --all
	packObjects bool // git gc (which packs the refs too)
}

func (l layout) String() string {
	refs, objs := "loose-refs", "loose-objects"
	if l.packedRefs || l.packObjects {
		refs = "packed-refs"
	}
	if l.packObjects {
		objs = "packed-objects"
	}
	return fmt.Sprintf("files=%d/%s/%s", l.files, refs, objs)
}

func newLayoutRepo(tb testing.TB, l layout) layoutRepo {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "repo")
	gitRun(tb, filepath.Dir(dir), "init", "-q", "-b", "main", dir)
	for i := range l.files {
		p := filepath.Join(dir, fmt.Sprintf("apps/app-%03d/cm-%04d.yaml", i%50, i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(cm(fmt.Sprintf("cm-%04d", i))), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	gitRun(tb, dir, "add", "-A")
	gitRun(tb, dir, "commit", "-q", "-m", "manifests")
	for i := range 20 {
		gitRun(tb, dir, "branch", fmt.Sprintf("feature-%02d", i))
		gitRun(tb, dir, "tag", fmt.Sprintf("v0.%d.0", i))
	}
	switch {
	case l.packObjects:
		gitRun(tb, dir, "gc", "-q")
	case l.packedRefs:
		gitRun(tb, dir, "pack-refs", "--all")
	}
	return layoutRepo{dir: dir, sha: gitRun(tb, dir, "rev-parse", "HEAD")}
}

var benchLayouts = []layout{
	{files: 300},
	{files: 300, packedRefs: true},
	{files: 300, packObjects: true},
	{files: 3000},
	{files: 3000, packObjects: true},
}

// BenchmarkMoved is the question a render and a quiet tick ask of a
// source that did not move, for each layout of a local repository (a path
// and a file:// URL) and over smart HTTP.
func BenchmarkMoved(b *testing.B) {
	for _, l := range benchLayouts {
		r := newLayoutRepo(b, l)
		for _, url := range []struct{ name, url string }{{"path", r.dir}, {"file-url", "file://" + r.dir}} {
			b.Run(url.name+"/"+l.String(), func(b *testing.B) {
				benchMoved(b, Options{URL: url.url})
			})
		}
	}
	r := newLayoutRepo(b, layout{files: 300, packObjects: true})
	wt := filepath.Join(b.TempDir(), "wt")
	gitRun(b, r.dir, "worktree", "add", "-q", "-b", "wt", wt)
	b.Run("worktree/"+layout{files: 300, packObjects: true}.String(), func(b *testing.B) {
		benchMoved(b, Options{URL: wt})
	})
	b.Run("http/"+layout{files: 300, packObjects: true}.String(), func(b *testing.B) {
		h := testenv.OpenRepo(b, r.dir)
		benchMoved(b, Options{URL: h.ServeHTTP(b, nil), CacheDir: b.TempDir()})
	})
}

// BenchmarkFetchQuiet is the read phase of a converged tick: a Fetch that
// finds the ref where it was.
func BenchmarkFetchQuiet(b *testing.B) {
	for _, l := range benchLayouts {
		r := newLayoutRepo(b, l)
		b.Run("path/"+l.String(), func(b *testing.B) {
			benchFetch(b, Options{URL: r.dir})
		})
	}
	r := newLayoutRepo(b, layout{files: 300, packObjects: true})
	b.Run("http/"+layout{files: 300, packObjects: true}.String(), func(b *testing.B) {
		h := testenv.OpenRepo(b, r.dir)
		benchFetch(b, Options{URL: h.ServeHTTP(b, nil), CacheDir: b.TempDir()})
	})
}

func benchMoved(b *testing.B, o Options) {
	s := newBenchSource(b, o)
	ctx := context.Background()
	rev, err := s.Fetch(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		moved, err := s.Moved(ctx, rev)
		if err != nil || moved {
			b.Fatalf("Moved = %v, %v", moved, err)
		}
	}
}

func benchFetch(b *testing.B, o Options) {
	s := newBenchSource(b, o)
	ctx := context.Background()
	first, err := s.Fetch(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		rev, err := s.Fetch(ctx)
		if err != nil || rev.SHA != first.SHA || rev.Fetched {
			b.Fatalf("Fetch = %+v, %v; want %s, not fetched", rev, err, first.SHA)
		}
	}
}

func newBenchSource(tb testing.TB, o Options) *Source {
	tb.Helper()
	s, err := New(o)
	if err != nil {
		tb.Fatalf("New(): %v", err)
	}
	return s
}
