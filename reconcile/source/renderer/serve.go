package renderer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	"recond.dev/recond/reconcile/source/worker"
)

// RunIfAsked serves one request and exits when the process was started
// as a render worker (worker.Env is set); otherwise it returns at once.
// Call it first thing in the render binary's main (and in TestMain of
// tests whose binary serves as the render binary). build is the binary's
// version, which recond checks at start (worker.Worker.Check).
func RunIfAsked(build string) {
	if os.Getenv(worker.Env) != "1" {
		return
	}
	os.Exit(Serve(os.Stdin, os.Stdout, os.Stderr, build))
}

// Serve reads one request on in and answers it on out: a render, or the
// binary's build (diag: what it says when it cannot answer on out). It
// returns the process's exit code.
func Serve(in io.Reader, out, diag io.Writer, build string) int {
	req, err := worker.ReadRequest(in)
	if err != nil {
		fmt.Fprintf(diag, "render worker: read the request: %v\n", err)
		return 2
	}
	if req.Version {
		if err := worker.WriteVersion(out, build); err != nil {
			fmt.Fprintf(diag, "render worker: write the answer: %v\n", err)
			return 2
		}
		return 0
	}
	if err := limitSelf(req); err != nil {
		// Said on the pipe with its reason (and on standard error, for a
		// parent that cannot read the answer).
		err = worker.NewSetupError(fmt.Errorf("render worker: %w", err))
		fmt.Fprintf(diag, "%v\n", err)
		_ = worker.WriteAnswer(out, nil, err, Classify)
		return 2
	}
	collectLate()
	res, err := renderJob(context.Background(), req.Job, true)
	if err := worker.WriteAnswer(out, res, err, Classify); err != nil {
		fmt.Fprintf(diag, "render worker: write the answer: %v\n", err)
		return 2
	}
	return 0
}

// limitSelf sets the worker's own limits before it reads the repository.
func limitSelf(req worker.Served) error {
	// The kernel's OOM killer takes the worker before recond.
	_ = os.WriteFile("/proc/self/oom_score_adj", []byte("1000"), 0)
	mem := req.MaxMemory
	if mem <= 0 {
		mem = worker.DefaultMemory
	}
	size, err := vmSize()
	if err != nil {
		return err
	}
	limits := []struct {
		res int
		val uint64
	}{
		{unix.RLIMIT_AS, size + uint64(mem)},
		{unix.RLIMIT_FSIZE, 0},
		{unix.RLIMIT_CORE, 0},
	}
	if req.CPU > 0 {
		limits = append(limits, struct {
			res int
			val uint64
		}{unix.RLIMIT_CPU, uint64(req.CPU)})
	}
	for _, l := range limits {
		set, err := lowerLimit(l.res, l.val)
		if err != nil {
			return err
		}
		if l.res == unix.RLIMIT_AS && set < l.val {
			// A lower cap than MaxMemory: the collector works to it, as
			// it does to MaxMemory (GOMEMLIMIT, 3/4 of it).
			if room := int64(set) - int64(size); room > 0 {
				debug.SetMemoryLimit(min(debug.SetMemoryLimit(-1), room/4*3))
			}
		}
	}
	return nil
}

// firstCollection is the heap at which the render binary collects its
// garbage for the first time (collectLate).
const firstCollection = 64 << 20

// collectLate has the collector wait, in the render binary, until the heap
// first reaches firstCollection (or the memory limit, when lower), and
// then collect as it does by default (GOGC, the memory limit as set):
// a render lives for one job, and most renders end before their heap
// grows that large, without having spent time collecting memory a process
// about to exit gives back anyway. The limits stay what they are
// (RLIMIT_AS, and a soft memory limit no higher than before).
func collectLate() {
	limit := debug.SetMemoryLimit(-1)
	percent := debug.SetGCPercent(-1)
	if percent < 0 {
		debug.SetGCPercent(percent) // GOGC=off: asked for, left as it is
		return
	}
	debug.SetMemoryLimit(min(limit, firstCollection))
	// The first collection finds the sentinel unreachable and runs its
	// finalizer, which restores the collector's settings.
	runtime.SetFinalizer(new(gcSentinel), func(*gcSentinel) {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
	})
}

// gcSentinel is an object of its own (not one of the tiny allocator's,
// which share a block with others): the first collection finds it
// unreachable.
type gcSentinel struct{ _ [4]*byte }

// rlimitNames names the limits the worker sets, for its errors.
var rlimitNames = map[int]string{
	unix.RLIMIT_AS:    "RLIMIT_AS (address space)",
	unix.RLIMIT_FSIZE: "RLIMIT_FSIZE (file size)",
	unix.RLIMIT_CORE:  "RLIMIT_CORE (core dump size)",
	unix.RLIMIT_CPU:   "RLIMIT_CPU (CPU time)",
}

// lowerLimit sets both the soft and the hard limit of res to want, or to
// the hard limit the process already has when that is lower (an
// unprivileged process may lower its hard limits, never raise them), and
// returns the value set.
func lowerLimit(res int, want uint64) (uint64, error) {
	var cur unix.Rlimit
	if err := unix.Getrlimit(res, &cur); err != nil {
		return 0, fmt.Errorf("getrlimit %s: %w", rlimitNames[res], err)
	}
	val := min(want, cur.Max) // RLIM_INFINITY is the largest value
	if err := unix.Setrlimit(res, &unix.Rlimit{Cur: val, Max: val}); err != nil {
		return 0, fmt.Errorf("setrlimit %s to %d (the hard limit was %d): %w", rlimitNames[res], val, cur.Max, err)
	}
	return val, nil
}

// vmSize is the process's address space now, in bytes.
func vmSize() (uint64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmSize:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmSize in /proc/self/status")
}
