package source

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/reconcile/source/worker"
)

// testWorker is a Worker that re-executes the test binary (TestMain serves
// the render).
func testWorker(t *testing.T) *Worker {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return &Worker{Path: exe}
}

// runawayFiles is a small kustomization whose build computes for minutes:
// n ConfigMaps labelled app=x, and patches JSON6902 patches that each
// target every one of them by label.
func runawayFiles(dir string, n, patches int) map[string]string {
	var cms, kust strings.Builder
	for i := range n {
		fmt.Fprintf(&cms, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c%d\n  labels:\n    app: x\ndata:\n  k: v\n", i)
	}
	kust.WriteString("resources:\n- cms.yaml\npatches:\n")
	for i := range patches {
		fmt.Fprintf(&kust, "- target:\n    kind: ConfigMap\n    labelSelector: app=x\n  patch: '[{\"op\": \"add\", \"path\": \"/data/p%d\", \"value\": \"v\"}]'\n", i)
	}
	return map[string]string{dir + "/kustomization.yaml": kust.String(), dir + "/cms.yaml": cms.String()}
}

// TestWorkerRendersAsInProcess renders kustomizations, good and bad, in a
// worker and in-process: the same objects, or the same error, with what
// callers ask of it (a *ManifestError's file and object, a *LimitError).
func TestWorkerRendersAsInProcess(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"ok/kustomization.yaml":      "resources:\n- cm.yaml\nnamePrefix: p-\ncommonLabels:\n  team: a\nconfigMapGenerator:\n- name: gen\n  literals:\n  - a=b\n",
		"ok/cm.yaml":                 cm("one"),
		"missing/kustomization.yaml": "resources:\n- nothere.yaml\n",
		"many/kustomization.yaml":    "resources:\n- cms.yaml\n",
		"many/cms.yaml":              cm("a") + "---\n" + cm("b") + "---\n" + cm("c"),
		"climb/kustomization.yaml":   "resources:\n- ../../etc/passwd\n",
	}
	sha := newTestRepo(t, dir).commit(files)
	for _, tc := range []struct {
		path   string
		limits Limits
	}{
		{path: "ok"},
		{path: "missing"},
		{path: "many", limits: Limits{MaxObjects: 2}},
		{path: "many", limits: Limits{MaxBytes: 100}},
		{path: "climb"},
	} {
		t.Run(fmt.Sprintf("%s %+v", tc.path, tc.limits), func(t *testing.T) {
			in, inErr := mustNew(t, Config{URL: dir, Path: tc.path, Limits: tc.limits}).Render(context.Background(), sha)
			out, outErr := mustNew(t, Config{URL: dir, Path: tc.path, Limits: tc.limits, Worker: testWorker(t)}).Render(context.Background(), sha)
			if (inErr == nil) != (outErr == nil) {
				t.Fatalf("in-process error %v, worker error %v", inErr, outErr)
			}
			if inErr != nil {
				var inME, outME *ManifestError
				if errors.As(inErr, &inME) != errors.As(outErr, &outME) {
					t.Fatalf("in-process %T, worker %T: want both *ManifestError or neither", inErr, outErr)
				}
				var inLE, outLE *LimitError
				if errors.As(inErr, &inLE) {
					if !errors.As(outErr, &outLE) || *inLE != *outLE {
						t.Fatalf("worker error %v; want the LimitError %+v", outErr, inLE)
					}
				}
				if inErr.Error() != outErr.Error() {
					t.Errorf("errors differ:\nin-process: %v\nworker:     %v", inErr, outErr)
				}
				return
			}
			if diff := cmp.Diff(names(in), names(out)); diff != "" {
				t.Errorf("objects differ (-in-process +worker):\n%s", diff)
			}
			for i := range in {
				if diff := cmp.Diff(in[i].Object.Object, out[i].Object.Object); diff != "" {
					t.Errorf("%s differs (-in-process +worker):\n%s", names(in)[i], diff)
				}
			}
		})
	}
}

// TestRunawayRenderIsStopped renders a kustomization that computes for
// minutes with a short deadline, then the fixed commit: the worker is
// killed at the deadline (ErrRenderKilled, the context's error), leaves no
// process behind, and the next render does not wait for it. In-process
// (Worker nil) the same second render waits for the first one's lock and
// fails: that is what the worker is for.
func TestRunawayRenderIsStopped(t *testing.T) {
	dir := t.TempDir()
	repo := newTestRepo(t, dir)
	runaway := repo.commit(runawayFiles("app", 1000, 100))
	fixed := repo.commit(map[string]string{"app/kustomization.yaml": "resources:\n- cm.yaml\n", "app/cm.yaml": cm("fixed")})

	s := mustNew(t, Config{URL: dir, Path: "app", Worker: testWorker(t)})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ms, err := s.Render(ctx, runaway)
	if !errors.Is(err, ErrRenderKilled) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Render(runaway) = %d objects, %v; want ErrRenderKilled and the deadline", len(ms), err)
	}
	if pids := workerChildren(t); len(pids) > 0 {
		t.Fatalf("render workers still running after the render returned: %v", pids)
	}
	// Generous: only a render that waits for the runaway one can take it.
	ctx2, cancel2 := context.WithTimeout(context.Background(), time.Minute)
	defer cancel2()
	ms, err = s.Render(ctx2, fixed)
	if err != nil || len(ms) != 1 {
		t.Fatalf("Render(fixed) after a killed render = %v, %v; want the one ConfigMap", names(ms), err)
	}
}

// TestWorkerIsConfined looks at a running worker from outside: its own
// network namespace, its limits (address space, no file writes, no core,
// CPU), an OOM score that makes it the kernel's first choice, and none of
// recond's environment.
func TestWorkerIsConfined(t *testing.T) {
	dir := t.TempDir()
	sha := newTestRepo(t, dir).commit(runawayFiles("app", 1000, 100))
	t.Setenv("RECOND_TOKEN_CANARY", "canary-value")
	s := mustNew(t, Config{URL: dir, Path: "app", Worker: &Worker{Path: testWorker(t).Path, MaxMemory: 256 << 20}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	errc := make(chan error, 1)
	go func() { _, err := s.Render(ctx, sha); errc <- err }()

	var pid int
	for pid == 0 {
		select {
		case err := <-errc:
			t.Fatalf("the runaway render returned: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		// The worker is confined once it has set its limits (before it
		// reads the repository): wait for the address-space limit.
		for _, p := range workerChildren(t) {
			if lim, _ := os.ReadFile(fmt.Sprintf("/proc/%d/limits", p)); strings.Contains(string(lim), "Max file size             0") {
				pid = p
			}
		}
	}
	defer func() {
		cancel()
		<-errc
	}()
	proc := func(name string) string {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	limits := proc("limits")
	for _, want := range []string{"Max file size             0", "Max core file size        0"} {
		if !strings.Contains(limits, want) {
			t.Errorf("worker limits lack %q:\n%s", want, limits)
		}
	}
	for _, l := range strings.Split(limits, "\n") {
		f := strings.Fields(l)
		switch {
		case strings.HasPrefix(l, "Max address space") && (len(f) < 4 || f[3] == "unlimited"):
			t.Errorf("no address-space limit: %q", l)
		case strings.HasPrefix(l, "Max cpu time") && (len(f) < 4 || f[3] == "unlimited"):
			t.Errorf("no CPU time limit: %q", l)
		}
	}
	if got := strings.TrimSpace(proc("oom_score_adj")); got != "1000" {
		t.Errorf("oom_score_adj = %s, want 1000", got)
	}
	if env := proc("environ"); strings.Contains(env, "canary-value") {
		t.Errorf("the worker has recond's environment: %q", env)
	}
	self, _ := os.Readlink("/proc/self/ns/net")
	child, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		t.Fatal(err)
	}
	if s.cfg.Worker.NetNSRefused() {
		t.Skipf("this platform refuses a network namespace to the worker; the rest was checked")
	}
	if child == self {
		t.Errorf("the worker shares recond's network namespace %s", self)
	}
}

// TestWorkerOutOfMemory renders, under a small memory cap, a kustomization
// whose build needs more: a LimitError of LimitMemory naming the flag.
func TestWorkerOutOfMemory(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector cannot run under an address-space limit of this size")
	}
	dir := t.TempDir()
	var data strings.Builder
	for i := range 200_000 {
		fmt.Fprintf(&data, "  k%d: v\n", i)
	}
	sha := newTestRepo(t, dir).commit(map[string]string{
		"app/kustomization.yaml": "resources:\n- cm.yaml\ncommonLabels:\n  a: b\n",
		"app/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n" + data.String(),
	})
	s := mustNew(t, Config{URL: dir, Path: "app", Worker: &Worker{Path: testWorker(t).Path, MaxMemory: 32 << 20}})
	_, err := s.Render(context.Background(), sha)
	var le *LimitError
	if !errors.As(err, &le) || le.Limit != LimitMemory || le.Flag != "--render-max-memory" {
		t.Fatalf("Render() = %v (%T); want a memory LimitError", err, errors.Unwrap(err))
	}
}

// workerChildren lists this process's children that are render workers.
func workerChildren(t *testing.T) []int {
	t.Helper()
	return testenv.ChildrenWithEnv(os.Getpid(), worker.Env+"=1")
}
