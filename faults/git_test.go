package faults

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"recond.dev/recond/internal/testenv"
)

// The Git rows of the fault matrix: the server down, hanging or refusing
// the credentials, the followed ref deleted, a force-pushed history, an
// empty revision, a huge repository, a damaged or deleted clone and a full
// disk. Every repository is served over smart HTTP (git http-backend) and
// recond runs with its default --observe watch.

// gitManifests is the manifests directory (--path) of every row.
const gitManifests = "manifests"

// gitConfigMap is a ConfigMap manifest named name with data k: v.
func gitConfigMap(name, v string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  k: %q\n", name, v)
}

// gitFiles is n ConfigMaps cm-00.. under gitManifests with value v, and a
// README at the root.
func gitFiles(n int, v string) map[string]string {
	files := map[string]string{"README.md": "manifests for the fault matrix\n"}
	for i := range n {
		name := fmt.Sprintf("cm-%02d", i)
		files[gitManifests+"/"+name+".yaml"] = gitConfigMap(name, v)
	}
	return files
}

// gitLiveCM is what the rows compare of a live ConfigMap.
type gitLiveCM struct {
	UID, ResourceVersion, Value string
}

// gitLive returns the ConfigMaps cm-* of ns.
func gitLive(t *testing.T, ns string) map[string]gitLiveCM {
	t.Helper()
	list, err := cp.Client.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list configmaps: %v", err)
	}
	out := map[string]gitLiveCM{}
	for _, cm := range list.Items {
		if strings.HasPrefix(cm.Name, "cm-") {
			out[cm.Name] = gitLiveCM{UID: string(cm.UID), ResourceVersion: cm.ResourceVersion, Value: cm.Data["k"]}
		}
	}
	return out
}

// gitCheckUntouched fails the test when the ConfigMaps of ns differ from
// before (a deletion, a new object, a write).
func gitCheckUntouched(t *testing.T, ns string, before map[string]gitLiveCM) {
	t.Helper()
	if diff := cmp.Diff(before, gitLive(t, ns)); diff != "" {
		t.Errorf("live objects changed during the fault (-before +now):\n%s", diff)
	}
}

// gitCheckNoWrites fails the test when a tick above after wrote or pruned.
func gitCheckNoWrites(t *testing.T, r *Recond, after uint64) {
	t.Helper()
	for _, tk := range r.Ticks() {
		if tk.ID > after && (tk.Num("pruned") > 0 || tk.Num("created") > 0 || tk.Num("updated") > 0) {
			t.Errorf("%s wrote during the fault: created %v, updated %v, pruned %v", tk, tk.Num("created"), tk.Num("updated"), tk.Num("pruned"))
		}
	}
}

// gitAt accepts a successful tick at the commit sha.
func gitAt(sha string) func(Tick) bool {
	return func(t Tick) bool {
		rev := t.Str("revision")
		return !t.Failed() && rev != "" && strings.HasPrefix(sha, rev)
	}
}

// gitFailures is recond_phase_failures_total{phase, reason}.
func gitFailures(r *Recond, phase, reason string) float64 {
	return r.Metric("recond_phase_failures_total", map[string]string{"phase": phase, "reason": reason})
}

// startGit starts recond on url with the manifests of gitManifests and
// waits until it converged; it returns the converged tick.
func startGit(t *testing.T, url, ns string, extra ...string) (*Recond, Tick) {
	t.Helper()
	args := append(Base(t, url, ns, Kubeconfig(t)), "--path", gitManifests)
	r := StartRecond(t, append(args, extra...)...)
	first := r.WaitTick(60*time.Second, 0, Succeeded)
	return r, r.WaitTick(30*time.Second, first.ID, Converged)
}

// gitFaultOn waits for the first tick above after failing in phase with
// reason, then for a second one (the fault holds across ticks), checks the
// failure counter moved by at least two, and returns the last failed tick.
func gitFaultOn(t *testing.T, r *Recond, after uint64, before float64, phase, reason string, timeout time.Duration) Tick {
	t.Helper()
	tk := r.WaitTick(timeout, after, FailedIn(phase, reason))
	t.Logf("during the fault: %s", tk)
	tk = r.WaitTick(timeout, tk.ID, FailedIn(phase, reason))
	if got := gitFailures(r, phase, reason); got < before+2 {
		t.Errorf("recond_phase_failures_total{phase=%q,reason=%q} = %v, want at least %v", phase, reason, got, before+2)
	}
	return tk
}

// gitFault is what a fault row expects of a fault: from the converged tick
// on, ticks fail in phase with reason, write nothing and leave the
// ConfigMaps of ns as they were.
type gitFault struct {
	r             *Recond
	ok            Tick // the converged tick
	ns            string
	before        map[string]gitLiveCM // the ConfigMaps at ok
	phase, reason string
	failures      float64 // the failures counted at ok
}

// expectFault notes, before a fault, what the fault must leave as it is.
func expectFault(t *testing.T, r *Recond, ok Tick, ns, phase, reason string) *gitFault {
	t.Helper()
	return &gitFault{r: r, ok: ok, ns: ns, before: gitLive(t, ns), phase: phase, reason: reason, failures: gitFailures(r, phase, reason)}
}

// holds waits for the fault to fail two ticks (gitFaultOn), checks that no
// tick wrote and that the ConfigMaps are as they were, and returns the last
// failed tick.
func (f *gitFault) holds(t *testing.T, timeout time.Duration) Tick {
	t.Helper()
	last := gitFaultOn(t, f.r, f.ok.ID, f.failures, f.phase, f.reason, timeout)
	gitCheckNoWrites(t, f.r, f.ok.ID)
	gitCheckUntouched(t, f.ns, f.before)
	return last
}

// checkHungTicks checks the failed ticks above after, which hung on their
// source: each ended at its deadline (tickTimeout), not before (a timer
// never fires early, so this holds on any machine), and because what hung
// (a fetch, a request) gave up there: one that ignored its deadline would
// have been abandoned, counted in recond_loop_stalls_total (the
// wedged-phase row).
func checkHungTicks(t *testing.T, r *Recond, after uint64, tickTimeout time.Duration, what string) {
	t.Helper()
	for _, tk := range r.Ticks() {
		if tk.ID <= after || !tk.Failed() {
			continue
		}
		d, err := time.ParseDuration(tk.Str("duration"))
		if err != nil || d < tickTimeout-100*time.Millisecond {
			t.Errorf("%s took %s, want at least --tick-timeout %s", tk, tk.Str("duration"), tickTimeout)
		}
		t.Logf("hung tick %d took %s: %s", tk.ID, tk.Str("duration"), tk.Error)
	}
	if v := r.Metric("recond_loop_stalls_total", nil); v > 0 {
		t.Errorf("recond_loop_stalls_total = %v: a hung %s was abandoned instead of ending at the tick's deadline", v, what)
	}
}

// gitRow is the start of most Git rows: a repository at gitFiles(3, "v1")
// served over smart HTTP and recond converged on it.
type gitRow struct {
	repo *testenv.Repo
	srv  *testenv.GitServer
	ns   string
	r    *Recond
	ok   Tick // the converged tick
}

// startGitRow serves a repository at gitFiles(3, "v1") through wrap (when
// not nil) and starts recond on it (startGit, with extra).
func startGitRow(t *testing.T, wrap func(http.Handler) http.Handler, extra ...string) gitRow {
	t.Helper()
	cp.Require(t)
	g := gitRow{repo: testenv.NewRepo(t)}
	g.repo.Commit("v1", gitFiles(3, "v1"))
	g.srv = g.repo.StartHTTPServer(t, wrap)
	g.ns = cp.Namespace(t)
	g.r, g.ok = startGit(t, g.srv.URL(), g.ns, extra...)
	return g
}

// TestFaultGitServerDown: the Git server goes away (connection refused)
// and comes back on the same address, with a commit pushed meanwhile.
func TestFaultGitServerDown(t *testing.T) {
	g := startGitRow(t, nil)
	f := expectFault(t, g.r, g.ok, g.ns, "read", "unavailable")

	g.srv.Stop()
	sha := g.repo.Commit("v2", gitFiles(3, "v2"))
	last := f.holds(t, 20*time.Second)
	if !strings.Contains(last.Error, "connection refused") {
		t.Errorf("error %q does not say connection refused", last.Error)
	}

	g.srv.Start()
	g.r.Recovery("git server down", time.Now(), last.ID, 2, 20*time.Second, gitAt(sha))
	if got := gitLive(t, g.ns)["cm-00"].Value; got != "v2" {
		t.Errorf("cm-00 = %q after recovery, want v2", got)
	}
}

// TestFaultGitServerHangs: the server accepts and reads the request but
// never answers; each tick ends at --tick-timeout with reason timeout and
// the next one starts on time.
func TestFaultGitServerHangs(t *testing.T) {
	var hang atomic.Bool
	const tickTimeout = 2 * time.Second
	g := startGitRow(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if hang.Load() {
				<-req.Context().Done() // until the client gives up
				return
			}
			h.ServeHTTP(w, req)
		})
	}, "--interval", "2s", "--tick-timeout", tickTimeout.String())
	r, ok := g.r, g.ok
	f := expectFault(t, r, ok, g.ns, "read", "timeout")

	hang.Store(true)
	sha := g.repo.Commit("v2", gitFiles(3, "v2"))
	last := f.holds(t, 30*time.Second)
	checkHungTicks(t, r, ok.ID, tickTimeout, "fetch")

	hang.Store(false)
	r.Recovery("git server hangs", time.Now(), last.ID, 2, 30*time.Second, gitAt(sha))
}

// TestFaultGitAuth: the server stops accepting the token (it was rotated
// on the server); recond fails with reason auth until the token file holds
// the new one, which it reads again at every fetch.
func TestFaultGitAuth(t *testing.T) {
	for _, code := range []int{http.StatusUnauthorized, http.StatusForbidden} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			var want atomic.Value
			want.Store("token-one")
			tokenFile := WriteFile(t, "token", "token-one\n")
			g := startGitRow(t, func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
					if _, p, ok := req.BasicAuth(); !ok || p != want.Load().(string) {
						w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
						http.Error(w, "bad credentials", code)
						return
					}
					h.ServeHTTP(w, req)
				})
			}, "--git-token-file", tokenFile)
			r := g.r
			f := expectFault(t, r, g.ok, g.ns, "read", "auth")

			want.Store("token-two-secret")
			sha := g.repo.Commit("v2", gitFiles(3, "v2"))
			last := f.holds(t, 20*time.Second)

			if err := os.WriteFile(tokenFile, []byte("token-two-secret\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			r.Recovery(fmt.Sprintf("git auth %d", code), time.Now(), last.ID, 2, 20*time.Second, gitAt(sha))
			for _, secret := range []string{"token-one", "token-two-secret"} {
				if strings.Contains(r.Log(), secret) {
					t.Errorf("the log contains the token %q", secret)
				}
			}
		})
	}
}

// TestFaultGitRefDeleted: the followed branch (--ref) is deleted, then
// created again at a new commit.
func TestFaultGitRefDeleted(t *testing.T) {
	cp.Require(t)
	repo := testenv.NewRepo(t)
	repo.SetBranch("release", repo.Commit("v1", gitFiles(3, "v1")))
	srv := repo.StartHTTPServer(t, nil)
	ns := cp.Namespace(t)
	r, ok := startGit(t, srv.URL(), ns, "--ref", "release")
	f := expectFault(t, r, ok, ns, "read", "not_found")

	repo.DeleteBranch("release")
	last := f.holds(t, 20*time.Second)
	if !strings.Contains(last.Error, `"release"`) {
		t.Errorf("error %q does not name the ref", last.Error)
	}

	sha := repo.Commit("v2", gitFiles(3, "v2"))
	repo.SetBranch("release", sha)
	r.Recovery("git ref deleted", time.Now(), last.ID, 2, 20*time.Second, gitAt(sha))
}

// TestFaultGitForcePush: the branch is force-pushed with an unrelated
// history holding other manifests. This is not a fault of recond: Git is
// the desired state, so recond follows the new head, applies it and prunes
// what left it.
func TestFaultGitForcePush(t *testing.T) {
	cp.Require(t)
	repo := testenv.NewRepo(t)
	for i := range 5 {
		repo.Commit(fmt.Sprint("v", i), gitFiles(3, fmt.Sprint("v", i)))
	}
	srv := repo.StartHTTPServer(t, nil)
	ns := cp.Namespace(t)
	r, ok := startGit(t, srv.URL(), ns)
	before := gitLive(t, ns)

	pushed := time.Now()
	sha := repo.Orphan("unrelated", map[string]string{
		gitManifests + "/cm-01.yaml": gitConfigMap("cm-01", "new"),
		gitManifests + "/cm-09.yaml": gitConfigMap("cm-09", "new"),
	})
	r.Recovery("git force-push", pushed, ok.ID, 2, 20*time.Second, gitAt(sha))
	applied := r.WaitTick(time.Second, ok.ID, gitAt(sha))
	if applied.Num("pruned") != 2 || applied.Num("created") != 1 || applied.Num("updated") != 1 {
		t.Errorf("%s: created %v, updated %v, pruned %v; want 1, 1, 2", applied, applied.Num("created"), applied.Num("updated"), applied.Num("pruned"))
	}
	got := gitLive(t, ns)
	if diff := cmp.Diff([]string{"cm-01", "cm-09"}, slices.Sorted(maps.Keys(got))); diff != "" {
		t.Errorf("live ConfigMaps after the force-push (-want +got):\n%s", diff)
	}
	if got["cm-01"].UID != before["cm-01"].UID || got["cm-01"].Value != "new" {
		t.Errorf("cm-01 = %+v, want the same object (uid %s) updated to new", got["cm-01"], before["cm-01"].UID)
	}
	r.WaitTick(10*time.Second, applied.ID, Converged)
}

// TestFaultGitEmptyRevision: a commit deletes every manifest. With
// --allow-empty=false (the default) the empty-set guard refuses it, and
// nothing is pruned; a later commit restoring them recovers.
func TestFaultGitEmptyRevision(t *testing.T) {
	tests := []struct {
		name          string
		remove        map[string]string // the commit that empties the path
		phase, reason string
	}{
		// The directory stays (it holds a non-manifest file): the desired
		// set is empty, which the diff phase refuses.
		{"manifests deleted", map[string]string{
			gitManifests + "/cm-00.yaml": "", gitManifests + "/cm-01.yaml": "", gitManifests + "/cm-02.yaml": "",
			gitManifests + "/notes.txt": "no manifests here\n",
		}, "diff", "invalid"},
		// The directory is gone: the read phase refuses a missing --path.
		{"directory deleted", map[string]string{
			gitManifests + "/cm-00.yaml": "", gitManifests + "/cm-01.yaml": "", gitManifests + "/cm-02.yaml": "",
		}, "read", "invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := startGitRow(t, nil)
			f := expectFault(t, g.r, g.ok, g.ns, tt.phase, tt.reason)

			g.repo.Commit("empty", tt.remove)
			last := f.holds(t, 20*time.Second)

			sha := g.repo.Commit("restore", gitFiles(3, "v2"))
			g.r.Recovery("git empty revision: "+tt.name, time.Now(), last.ID, 2, 20*time.Second, gitAt(sha))
			if got, before := gitLive(t, g.ns), f.before; got["cm-02"].UID != before["cm-02"].UID || got["cm-02"].Value != "v2" {
				t.Errorf("cm-02 = %+v, want the same object (uid %s) at v2", got["cm-02"], before["cm-02"].UID)
			}
		})
	}
}

// gitFastImport writes commits into repo's .git with git fast-import: a
// stream is much faster than go-git's work tree for big histories.
func gitFastImport(t *testing.T, repo *testenv.Repo, stream string) {
	t.Helper()
	cmd := exec.Command("git", "fast-import", "--quiet", "--force")
	cmd.Env = append(os.Environ(), "GIT_DIR="+filepath.Join(repo.Dir, ".git"))
	cmd.Stdin = strings.NewReader(stream)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git fast-import: %v\n%s", err, out)
	}
}

// gitImportCommit is one commit of a fast-import stream on refs/heads/main,
// after from ("" for the first commit), writing files.
func gitImportCommit(b *strings.Builder, mark int, from string, files map[string]string) {
	fmt.Fprintf(b, "commit refs/heads/main\nmark :%d\ncommitter test <test@example.com> %d +0000\ndata 9\ncommit %02d\n",
		mark, 1_700_000_000+mark, mark%100)
	if from != "" {
		fmt.Fprintf(b, "from %s\n", from)
	}
	for _, p := range slices.Sorted(maps.Keys(files)) {
		fmt.Fprintf(b, "M 100644 inline %s\ndata %d\n%s\n", p, len(files[p]), files[p])
	}
}

// TestFaultGitHugeRepository: a history of 10,000 commits whose last tree
// holds 5,000 files, 100 of them manifests under --path. recond fetches
// one commit deep, so the history costs the server, not recond; the test
// logs the first fetch, recond's resident memory and an incremental fetch.
func TestFaultGitHugeRepository(t *testing.T) {
	cp.Require(t)
	const commits, files, manifests = 10_000, 5_000, 100
	repo := testenv.NewRepo(t)
	var b strings.Builder
	filler := strings.Repeat("filler line of a file that is not a manifest\n", 20) // ~900 bytes
	path := func(i int) string {
		if i%(files/manifests) == 0 {
			return fmt.Sprintf("%s/cm-%02d.yaml", gitManifests, i/(files/manifests))
		}
		return fmt.Sprintf("other/%02d/f-%04d.txt", i%97, i)
	}
	content := func(i, version int) string {
		if i%(files/manifests) == 0 {
			return gitConfigMap(fmt.Sprintf("cm-%02d", i/(files/manifests)), fmt.Sprint("v", version))
		}
		return fmt.Sprintf("%d %d\n%s", i, version, filler)
	}
	built := time.Now()
	for c := range commits {
		from := ""
		if c > 0 {
			from = fmt.Sprintf(":%d", c)
		}
		i := c % files
		gitImportCommit(&b, c+1, from, map[string]string{path(i): content(i, c/files)})
	}
	gitFastImport(t, repo, b.String())
	t.Logf("built %d commits, %d files (%d manifests) in %s", commits, files, manifests, time.Since(built).Round(time.Millisecond))

	srv := repo.StartHTTPServer(t, nil)
	ns := cp.Namespace(t)
	r, ok := startGit(t, srv.URL(), ns, "--interval", "2s")
	first := r.Ticks()[0]
	for _, tk := range r.Ticks() {
		if tk.Num("desired") > 0 || tk.Failed() {
			first = tk
			break
		}
	}
	if first.Failed() || first.Num("desired") != manifests {
		t.Fatalf("first tick %s: desired %v, want %d", first, first.Num("desired"), manifests)
	}
	rss := r.Metric("process_resident_memory_bytes", nil)
	t.Logf("first fetch: read phase %s, tick %s, %.0f MiB resident after converging (tick %d)",
		first.Str("read"), first.Str("duration"), rss/(1<<20), ok.ID)

	b.Reset()
	gitImportCommit(&b, 1, "refs/heads/main^0", map[string]string{path(0): content(0, 9)})
	pushed := time.Now()
	gitFastImport(t, repo, b.String())
	out, err := exec.Command("git", "--git-dir", filepath.Join(repo.Dir, ".git"), "rev-parse", "refs/heads/main").Output()
	if err != nil {
		t.Fatal(err)
	}
	sha := strings.TrimSpace(string(out))
	r.Recovery("git huge repository: new commit", pushed, ok.ID, 2, 30*time.Second, gitAt(sha))
	inc := r.WaitTick(time.Second, ok.ID, gitAt(sha))
	if inc.Num("updated") != 1 || inc.Num("pruned") != 0 {
		t.Errorf("%s: updated %v, pruned %v; want 1, 0", inc, inc.Num("updated"), inc.Num("pruned"))
	}
	t.Logf("incremental fetch: read phase %s, tick %s, %.0f MiB resident", inc.Str("read"), inc.Str("duration"),
		r.Metric("process_resident_memory_bytes", nil)/(1<<20))
	if got := gitLive(t, ns); len(got) != manifests || got["cm-00"].Value != "v9" {
		t.Errorf("live: %d ConfigMaps, cm-00 = %q; want %d and v9", len(got), got["cm-00"].Value, manifests)
	}
}

// gitCloneDir is the one clone under recond's --cache-dir.
func gitCloneDir(t *testing.T, cache string) string {
	t.Helper()
	entries, err := os.ReadDir(cache)
	if err != nil || len(entries) != 1 || !entries[0].IsDir() {
		t.Fatalf("want one clone in %s, have %v (%v)", cache, entries, err)
	}
	return filepath.Join(cache, entries[0].Name())
}

// gitDamage applies f to every file matching pattern under the clone.
func gitDamage(t *testing.T, dir, pattern string, f func(path string) error) {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(dir, pattern))
	if len(paths) == 0 {
		t.Fatalf("nothing matches %s in the clone", pattern)
	}
	for _, p := range paths {
		if err := f(p); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFaultGitCacheDamaged: the clone in --cache-dir is damaged or
// deleted between ticks; recond rebuilds it and applies the next commit.
func TestFaultGitCacheDamaged(t *testing.T) {
	truncate := func(p string) error {
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		return os.Truncate(p, st.Size()/2)
	}
	garbage := func(p string) error {
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		junk := make([]byte, st.Size())
		for i := range junk {
			junk[i] = byte(i*7 + 3)
		}
		return os.WriteFile(p, junk, 0o644)
	}
	tests := []struct {
		name   string
		damage func(t *testing.T, clone string)
	}{
		{"pack truncated", func(t *testing.T, clone string) { gitDamage(t, clone, "objects/pack/*.pack", truncate) }},
		{"pack garbage", func(t *testing.T, clone string) { gitDamage(t, clone, "objects/pack/*.pack", garbage) }},
		{"index garbage", func(t *testing.T, clone string) { gitDamage(t, clone, "objects/pack/*.idx", garbage) }},
		{"HEAD deleted", func(t *testing.T, clone string) { gitDamage(t, clone, "HEAD", os.Remove) }},
		{"refs garbage", func(t *testing.T, clone string) {
			gitDamage(t, clone, "refs/heads/*", func(p string) error { return os.WriteFile(p, []byte("garbage\n"), 0o644) })
		}},
		{"shallow garbage", func(t *testing.T, clone string) {
			gitDamage(t, clone, "shallow", func(p string) error { return os.WriteFile(p, []byte("not a sha\n"), 0o644) })
		}},
		{"clone deleted", func(t *testing.T, clone string) {
			if err := os.RemoveAll(clone); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cache := t.TempDir()
			g := startGitRow(t, nil, "--cache-dir", cache)
			repo, ns, r, ok := g.repo, g.ns, g.r, g.ok
			before := gitLive(t, ns)

			tt.damage(t, gitCloneDir(t, cache))
			damaged := time.Now()
			// The same revision first (its render is reused, but the fetch
			// reads the clone), then a new one (render reads the objects).
			r.Recovery("git cache damaged, same revision: "+tt.name, damaged, ok.ID, 2, 10*time.Second, gitAt(ok.Str("revision")))
			gitCheckUntouched(t, ns, before)
			sha := repo.Commit("v2", gitFiles(3, "v2"))
			r.Recovery("git cache damaged, new revision: "+tt.name, time.Now(), r.LastTick().ID, 2, 10*time.Second, gitAt(sha))
			for _, tk := range r.Ticks() {
				if tk.ID > ok.ID && tk.Failed() {
					t.Errorf("%s", tk)
				}
			}
		})
	}
}

// TestFaultGitCacheDeletedRepeatedly: a cleaner deletes the clone after
// every tick, 20 times in a row, while commits keep coming; no tick fails
// and recond keeps up with Git.
func TestFaultGitCacheDeletedRepeatedly(t *testing.T) {
	cp.Require(t)
	repo := testenv.NewRepo(t)
	repo.Commit("v0", gitFiles(3, "v0"))
	srv := repo.StartHTTPServer(t, nil)
	ns := cp.Namespace(t)
	cache := t.TempDir()
	// Every tick clones afresh: on a loaded machine that can take longer
	// than the 1 s interval, which is not the fault under test.
	r, ok := startGit(t, srv.URL(), ns, "--cache-dir", cache, "--tick-timeout", "10s")
	last, sha := ok, ""
	for i := range 20 {
		if err := os.RemoveAll(gitCloneDir(t, cache)); err != nil {
			t.Fatal(err)
		}
		if i%4 == 3 {
			sha = repo.Commit(fmt.Sprint("v", i), gitFiles(3, fmt.Sprint("v", i)))
		}
		last = r.WaitTick(20*time.Second, last.ID, func(Tick) bool { return true })
		if last.Failed() {
			t.Errorf("deletion %d: %s", i+1, last)
		}
	}
	r.Recovery("git cache deleted 20 times", time.Now(), last.ID, 2, 20*time.Second, gitAt(sha))
	if got := gitLive(t, ns)["cm-00"].Value; got != "v19" {
		t.Errorf("cm-00 = %q, want v19", got)
	}
}

// gitDiskFullReason is the reason a fetch that fills the disk fails with
// (Classify: the machine ran out of room, like a server that is down).
const gitDiskFullReason = "unavailable"

// TestFaultGitDiskFull: --cache-dir is a 1 MiB tmpfs and a commit brings a
// 2 MiB file: the fetch fails with ENOSPC and nothing is pruned; once the
// tmpfs is grown to 64 MiB the next tick applies the commit.
func TestFaultGitDiskFull(t *testing.T) {
	cp.Require(t)
	cache := filepath.Join(t.TempDir(), "cache")
	if err := os.Mkdir(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", cache).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root or CAP_SYS_ADMIN): %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", cache).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", cache, err, out)
		}
	})
	g := startGitRow(t, nil, "--cache-dir", cache)
	f := expectFault(t, g.r, g.ok, g.ns, "read", gitDiskFullReason)

	big := make([]byte, 2<<20)
	x := uint64(88172645463325252)
	for i := range big { // xorshift: incompressible, so the pack stays big
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		big[i] = byte(x)
	}
	files := gitFiles(3, "v2")
	files["assets/blob.bin"] = string(big)
	sha := g.repo.Commit("v2 with a big file", files)
	last := f.holds(t, 20*time.Second)
	if !strings.Contains(last.Error, "no space left on device") {
		t.Errorf("error %q does not say no space left on device", last.Error)
	}

	if out, err := exec.Command("mount", "-o", "remount,size=64m", cache).CombinedOutput(); err != nil {
		t.Fatalf("remount: %v: %s", err, out)
	}
	g.r.Recovery("git disk full", time.Now(), last.ID, 2, 20*time.Second, gitAt(sha))
}
