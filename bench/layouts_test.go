package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/internal/testenv/tools"
	"recond.dev/recond/reconcile"
	"recond.dev/recond/reconcile/cluster"
	"recond.dev/recond/reconcile/source"
	"recond.dev/recond/reconcile/source/renderer"
)

// TestConvergedLayouts measures a converged tick, and its read phase, for
// the same 300 objects kept in repositories of other layouts: more files
// beside the manifests, refs and objects packed by git gc, the repository
// named by its path or by a file:// URL. The read phase of a converged tick
// asks where the ref points; it must not cost in proportion to the
// repository.
//
//	RECOND_BENCH=1 go test -count=1 -run TestConvergedLayouts -v ./bench/
func TestConvergedLayouts(t *testing.T) {
	benchOnly(t)
	cp, err := testenv.StartControlPlane()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("stop control plane: %v", err)
		}
	})
	const n, ticks = 300, 30
	var table strings.Builder
	fmt.Fprintln(&table, "| files beside the manifests | refs and objects | URL | converged tick (median) | read phase (median) |")
	fmt.Fprintln(&table, "|---:|---|---|---:|---:|")
	for _, l := range []struct {
		files int
		gc    bool
		url   bool
	}{{0, false, true}, {300, false, false}, {300, true, false}, {3000, false, false}, {3000, true, false}, {3000, true, true}} {
		name := fmt.Sprintf("files=%d/gc=%v/url=%v", l.files, l.gc, l.url)
		t.Run(name, func(t *testing.T) {
			dir := layoutRepo(t, n, l.files, l.gc)
			url := dir
			if l.url {
				url = "file://" + dir
			}
			tick, read := convergedTicks(t, cp, url, n, ticks)
			refs := "loose"
			if l.gc {
				refs = "packed (git gc)"
			}
			form := "path"
			if l.url {
				form = "file://"
			}
			fmt.Fprintf(&table, "| %d | %s | %s | %s | %s |\n", l.files, refs, form,
				tick.Round(10*time.Microsecond), read.Round(10*time.Microsecond))
		})
	}
	t.Logf("converged ticks of %d objects by repository layout:\n%s", n, table.String())
}

// layoutRepo is a repository (made with the git binary) holding n objects
// under deploy/ and files other files under docs/, gc'd when gc.
func layoutRepo(t *testing.T, n, files int, gc bool) string {
	t.Helper()
	git := tools.Find(t, tools.Git)
	dir := filepath.Join(t.TempDir(), "repo")
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(git, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
			"GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@example.com",
			"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	write := func(p, content string) {
		t.Helper()
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	run("init", "-q", "-b", "main")
	for p, content := range manifests(n) {
		write("deploy/"+p, content)
	}
	for i := range files {
		write(fmt.Sprintf("docs/part-%02d/page-%04d.md", i%50, i), fmt.Sprintf("# page %d\n", i))
	}
	run("add", "-A")
	run("commit", "-q", "-m", "objects")
	for i := range 20 {
		run("branch", fmt.Sprintf("feature-%02d", i))
		run("tag", fmt.Sprintf("v0.%d.0", i))
	}
	if gc {
		run("gc", "-q")
	}
	return dir
}

// convergedTicks syncs n objects from url, then returns the median
// duration of k converged ticks and of their read phases.
func convergedTicks(t *testing.T, cp *testenv.ControlPlane, url string, n, k int) (tick, read time.Duration) {
	t.Helper()
	ctx := context.Background()
	ns := cp.Namespace(t)
	cfg, _ := restFor(cp)
	src, err := source.New(source.Config{Renderer: renderer.InProcess{}, URL: url, Path: "deploy", CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	kube, err := cluster.New(cfg, ns)
	if err != nil {
		t.Fatal(err)
	}
	rec := reconcile.New(reconcile.Config{Namespace: ns, Name: "recond", Path: "deploy", Prune: true, SelfHeal: true, ApplyConcurrency: 8}, src, kube, nil)
	step := func() *reconcile.Result {
		tctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		defer cancel()
		return rec.Tick(tctx)
	}
	for i := 0; ; i++ {
		res := step()
		if res.Outcome != reconcile.OutcomeFailed && res.Counts.Managed >= n {
			break
		}
		if i == 20 {
			t.Fatalf("not synced after %d ticks: %s, %v", i, res.Outcome, res.Failure())
		}
	}
	var ticks, reads []time.Duration
	for range k {
		res := step()
		if res.Outcome != reconcile.OutcomeConverged {
			t.Errorf("converged tick: outcome %s (failure: %v)", res.Outcome, res.Failure())
		}
		ticks = append(ticks, res.Duration)
		reads = append(reads, res.PhaseDuration(reconcile.PhaseRead))
	}
	return median(ticks), median(reads)
}
