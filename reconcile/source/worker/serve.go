package worker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"recond.dev/recond/reconcile/source/fetch"
	"recond.dev/recond/reconcile/source/helm"
	"recond.dev/recond/reconcile/source/kustomize"
	"recond.dev/recond/reconcile/source/render"
)

// Sources is what a worker needs of the kinds of source: Open opens a
// revision's tree where its source keeps it (the fetch.Location names the
// kind); Reason gives an error its reason (a *reason.Error, left as it is
// when it already is one); ReadFault tells an error that is a read of a
// source's cache that failed. The source facade lists them.
type Sources struct {
	Open      func(loc fetch.Location, rev, dir string, lim render.Limits) (*fetch.Tree, error)
	Reason    func(error) error
	ReadFault func(error) bool
}

func (s Sources) reason(err error) error {
	if s.Reason == nil {
		return err
	}
	return s.Reason(err)
}

func (s Sources) readFault(err error) bool {
	var re *render.ReadError
	return errors.As(err, &re) || s.ReadFault != nil && s.ReadFault(err)
}

// RunIfAsked serves one render and exits when the process was started as
// a render worker (Env is set); otherwise it returns at once. Call it
// first thing in main (and in TestMain of tests that render through a
// Worker).
func RunIfAsked(src Sources) {
	if os.Getenv(Env) != "1" {
		return
	}
	os.Exit(serve(os.Stdin, os.Stdout, os.Stderr, src))
}

func serve(in io.Reader, out, diag io.Writer, src Sources) int {
	var req request
	if err := json.NewDecoder(io.LimitReader(in, 1<<20)).Decode(&req); err != nil {
		fmt.Fprintf(diag, "render worker: read the request: %v\n", err)
		return 2
	}
	if err := limitSelf(req); err != nil {
		// Said on the pipe with its reason (and on standard error, for a
		// parent that cannot read the answer).
		err = newSetupError(fmt.Errorf("render worker: %w", err))
		fmt.Fprintf(diag, "%v\n", err)
		line, _ := json.Marshal(header{Err: toWire(err, src)})
		_, _ = out.Write(append(line, '\n'))
		return 2
	}
	b := render.NewBudget(req.Limits)
	var keysErr error
	if req.KeysErr != "" {
		keysErr = errors.New(req.KeysErr)
	}
	b.SetKeys(req.AgeKeys, req.KeysFile, keysErr)
	yaml, err := func() ([]byte, error) {
		if src.Open == nil {
			return nil, fmt.Errorf("render worker: no source opens %q", req.Tree.Source)
		}
		t, err := src.Open(req.Tree, req.SHA, req.Dir, req.Limits)
		if err != nil {
			return nil, err
		}
		root := t.Root
		var h helm.Request
		if req.Helm != nil {
			h = *req.Helm
		}
		if req.Chart {
			return helm.Build(context.Background(), root, req.Dir, b, h)
		}
		return kustomize.Build(context.Background(), root, req.Dir, b, h)
	}()
	w := bufio.NewWriter(out)
	h := header{Len: int64(len(yaml))}
	for _, v := range b.SecretValues() {
		h.Sensitive = append(h.Sensitive, []byte(v))
	}
	if err != nil {
		h = header{Err: toWire(err, src)}
	}
	line, _ := json.Marshal(h)
	w.Write(append(line, '\n'))
	if err == nil {
		w.Write(yaml)
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintf(diag, "render worker: write the answer: %v\n", err)
		return 2
	}
	return 0
}

// limitSelf sets the worker's own limits before it reads the repository.
func limitSelf(req request) error {
	// The kernel's OOM killer takes the worker before recond.
	_ = os.WriteFile("/proc/self/oom_score_adj", []byte("1000"), 0)
	mem := req.MaxMemory
	if mem <= 0 {
		mem = DefaultMemory
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
