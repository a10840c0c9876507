package source

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// addressSpaceCap is the cap of the tests below: what `prlimit
// --as=2000000000`, systemd's LimitAS= or `ulimit -v` give a process.
const addressSpaceCap = 2_000_000_000

// cappedWorker is a Worker whose process starts under a hard address-space
// limit of addressSpaceCap (set by a shell, as ulimit -v does, before it
// executes the test binary), and which asks for far more memory.
func cappedWorker(t *testing.T) *Worker {
	t.Helper()
	script := filepath.Join(t.TempDir(), "capped-worker")
	body := fmt.Sprintf("#!/bin/sh\nulimit -v %d || exit 9\nexec %s\n", addressSpaceCap/1024, strconv.Quote(testWorker(t).Path))
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return &Worker{Path: script, MaxMemory: 8 << 30}
}

// TestWorkerUnderAddressSpaceCap: a process started under an
// address-space cap lower than what the worker asks for (MaxMemory on top
// of its own mappings) renders all the same, with the cap as its limit:
// the worker takes the lower of the two, and never raises the cap (which
// only a process with CAP_SYS_RESOURCE could).
func TestWorkerUnderAddressSpaceCap(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector cannot run under an address-space limit of this size")
	}
	dir := t.TempDir()
	repo := newTestRepo(t, dir)
	harmless := repo.commit(map[string]string{
		"app/kustomization.yaml": "resources:\n- cm.yaml\nnamePrefix: p-\n",
		"app/cm.yaml":            cm("harmless"),
	})
	runaway := repo.commit(runawayFiles("app", 1000, 100))
	w := cappedWorker(t)

	ms, err := mustNew(t, Config{URL: dir, Path: "app", Worker: w}).Render(context.Background(), harmless)
	if err != nil || len(ms) != 1 || ms[0].Object.GetName() != "p-harmless" {
		t.Fatalf("Render under the cap = %v, %v; want the ConfigMap p-harmless", names(ms), err)
	}

	// The running worker's limit is the cap, not above it.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := mustNew(t, Config{URL: dir, Path: "app", Worker: w}).Render(ctx, runaway)
		errc <- err
	}()
	defer func() {
		cancel()
		<-errc
	}()
	for {
		select {
		case err := <-errc:
			t.Fatalf("the runaway render returned: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		for _, p := range workerChildren(t) {
			lim, _ := os.ReadFile(fmt.Sprintf("/proc/%d/limits", p))
			if !strings.Contains(string(lim), "Max file size             0") {
				continue // not set up yet
			}
			for _, l := range strings.Split(string(lim), "\n") {
				if f := strings.Fields(l); strings.HasPrefix(l, "Max address space") && len(f) >= 5 {
					soft, _ := strconv.ParseUint(f[3], 10, 64)
					hard, _ := strconv.ParseUint(f[4], 10, 64)
					if soft == 0 || soft > addressSpaceCap || hard > addressSpaceCap {
						t.Fatalf("the worker's address-space limit is %s/%s; want at most the cap %d", f[3], f[4], addressSpaceCap)
					}
					return
				}
			}
			t.Fatalf("no address-space limit in the worker's limits:\n%s", lim)
		}
	}
}

// TestWorkerFailureReasons: a worker that cannot start or set itself up
// fails with the reason of its cause, not other, and is not the commit's
// fault (no *ManifestError).
func TestWorkerFailureReasons(t *testing.T) {
	dir := t.TempDir()
	sha := newTestRepo(t, dir).commit(map[string]string{"app/kustomization.yaml": "resources:\n- cm.yaml\n", "app/cm.yaml": cm("a")})
	notExecutable := filepath.Join(t.TempDir(), "worker")
	if err := os.WriteFile(notExecutable, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		path string
		want Reason
	}{
		{"gone", filepath.Join(t.TempDir(), "recond"), ReasonNotFound},
		{"not executable", notExecutable, ReasonForbidden},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := mustNew(t, Config{URL: dir, Path: "app", Worker: &Worker{Path: c.path}}).Render(context.Background(), sha)
			var se *Error
			var me *ManifestError
			if !errors.As(err, &se) || se.Reason != c.want || errors.As(err, &me) {
				t.Fatalf("Render = %v (%T); want an *Error with reason %s", err, err, c.want)
			}
		})
	}
}
