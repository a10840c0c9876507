package source

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"recond.dev/recond/internal/transient"
	"recond.dev/recond/reconcile/source/fetch"
	"recond.dev/recond/reconcile/source/helm"
	"recond.dev/recond/reconcile/source/kustomize"
	"recond.dev/recond/reconcile/source/render"
)

// Worker runs kustomize in a process of its own: a render that computes
// for ever, or grows without end, cannot hold the long-lived process's CPU,
// memory or locks. The process is the binary at Path (recond's own,
// re-executed), which must call RunWorkerIfAsked first thing in main. It
// reads the commit's tree from the repository on disk (the local
// repository, or the bare clone), read-only, under the same sealed file
// system and Limits as an in-process render, and writes kustomize's output
// back on a pipe. It runs:
//
//   - with an address-space limit of MaxMemory on top of what it has
//     mapped when it starts (and GOMEMLIMIT), so that a render that grows
//     past it fails with a LimitError of LimitMemory, and with an OOM score
//     of 1000, so that the kernel's OOM killer takes it before recond;
//   - with no file it may write (RLIMIT_FSIZE 0), no core dump, and a CPU
//     time limit of every core for a little over the render's deadline, as
//     a backstop for a worker that outlives its kill;
//   - each limit no higher than the hard limit recond itself was started
//     with (systemd's LimitAS=, a shell's ulimit -v, prlimit), which a
//     process may lower and never raise: under a lower address-space cap
//     the worker's memory is that cap's;
//   - in a network namespace of its own (no interface but a loopback that
//     is down), where the platform allows one (root, or unprivileged user
//     namespaces); where it does not, without one, said once in the log;
//   - with an environment of its own (nothing of recond's: no tokens, no
//     OTLP endpoint), killed (SIGKILL) when the render's context is done
//     and when recond itself dies (PR_SET_PDEATHSIG).
//
// A render stopped by its context returns an error that wraps
// ErrRenderKilled and the context's error.
type Worker struct {
	// Path is the executable (os.Executable() of recond).
	Path string
	// MaxMemory caps the worker's memory, in bytes (--render-max-memory);
	// 0 is DefaultWorkerMemory.
	MaxMemory int64
	// Log, when set, receives a warning when the worker cannot have a
	// network namespace of its own (once per Worker).
	Log *slog.Logger

	warned  sync.Once
	noNetNS atomic.Bool // the platform refused a new network namespace
}

// DefaultWorkerMemory is the memory a render worker may use when
// Worker.MaxMemory is 0.
const DefaultWorkerMemory = 1 << 30

// ErrRenderKilled is wrapped by the error of a render whose worker was
// killed because the render's context ended (its deadline, or a stop).
var ErrRenderKilled = errors.New("render stopped: its worker process was killed")

// workerEnv marks the process as a render worker; RunWorkerIfAsked looks
// for it. The leading underscore keeps it apart from the RECOND_<FLAG>
// variables.
const workerEnv = "_RECOND_RENDER_WORKER"

// workerRequest is what the worker is asked to render.
type workerRequest struct {
	// Tree is where the source keeps the revision's files, for the kind
	// of source that named it to open them (openTree).
	Tree      fetch.Location `json:"tree"`
	SHA       string         `json:"sha"`
	Dir       string         `json:"dir"`
	Limits    Limits         `json:"limits"`
	MaxMemory int64          `json:"maxMemory"`
	CPU       int64          `json:"cpuSeconds"` // RLIMIT_CPU; 0 for none
	// Helm is what a chart needs (a kustomization's helmCharts too).
	Helm *helmRequest `json:"helm,omitempty"`
	// Chart renders the chart at Dir; else kustomize builds it.
	Chart bool `json:"chart,omitempty"`
	// AgeKeys is the content of the age keys file that decrypts SOPS
	// files (decrypt.go), KeysFile its name and KeysErr why it could not be
	// read: the worker reads nothing of recond's.
	AgeKeys  []byte `json:"ageKeys,omitempty"`
	KeysFile string `json:"keysFile,omitempty"`
	KeysErr  string `json:"keysErr,omitempty"`
}

// workerHeader is the first line of the worker's answer; Len bytes of
// kustomize's YAML output follow it when Err is nil.
type workerHeader struct {
	Err *wireError `json:"err,omitempty"`
	Len int64      `json:"len"`
	// Sensitive are the decrypted values that are secret wherever they
	// appear (decrypt.go), as bytes: a binary value stays whole.
	Sensitive [][]byte `json:"sensitive,omitempty"`
}

// wireError carries a render error across the pipe with what callers ask
// of it: a *ManifestError's file and object, a *LimitError, and whether
// it is the clone failing to read an object.
type wireError struct {
	File      string      `json:"file,omitempty"`
	Object    string      `json:"object,omitempty"`
	Msg       string      `json:"msg"`
	Limit     *LimitError `json:"limit,omitempty"`
	Manifest  bool        `json:"manifest,omitempty"`
	Worker    bool        `json:"worker,omitempty"` // a *workerError: the worker's own setup
	ReadFault bool        `json:"readFault,omitempty"`
	NoSeed    bool        `json:"noSeed,omitempty"` // ErrNoSeed
	Reason    Reason      `json:"reason,omitempty"` // an *Error's
	// Decrypt is a *DecryptError's file; Recipients its recipients.
	Decrypt    string   `json:"decrypt,omitempty"`
	Recipients []string `json:"recipients,omitempty"`
}

func toWire(err error) *wireError {
	w := &wireError{Msg: err.Error(), ReadFault: readFault(err), NoSeed: errors.Is(err, ErrNoSeed)}
	var se *Error
	if errors.As(withReason(err), &se) {
		w.Reason = se.Reason
	}
	var me *ManifestError
	if errors.As(err, &me) {
		w.Manifest, w.File, w.Object, w.Msg = true, me.File, me.Object, me.Err.Error()
	}
	var de *DecryptError
	if errors.As(err, &de) {
		w.Decrypt, w.Recipients = de.File, de.Recipients
	}
	var we *workerError
	w.Worker = errors.As(err, &we)
	if len(w.Msg) > maxWireMsg {
		w.Msg = w.Msg[:maxWireMsg] + "... (cut)"
	}
	var le *LimitError
	if errors.As(err, &le) {
		w.Limit = le
	}
	return w
}

func (w *wireError) err() error {
	var err error = errors.New(w.Msg)
	switch {
	case w.Limit != nil:
		err = w.Limit
	case w.ReadFault:
		err = &render.ReadError{Err: err}
	case w.NoSeed:
		err = fmt.Errorf("%s%w", strings.TrimSuffix(w.Msg, ErrNoSeed.Error()), ErrNoSeed)
	case w.Decrypt != "":
		err = &DecryptError{File: w.Decrypt, Recipients: w.Recipients, Err: err}
	case w.Worker:
		err = &workerError{err}
	}
	if w.Reason != "" {
		err = &Error{Reason: w.Reason, Err: err}
	}
	if w.Manifest {
		return &ManifestError{File: w.File, Object: w.Object, Err: err}
	}
	return err
}

// maxWireMsg caps an error's text on the pipe.
const maxWireMsg = 64 << 10

// RunWorkerIfAsked serves one render and exits when the process was
// started as a render worker; otherwise it returns at once. Call it first
// thing in main (and in TestMain of tests that render through a Worker).
func RunWorkerIfAsked() {
	if os.Getenv(workerEnv) != "1" {
		return
	}
	os.Exit(serveWorker(os.Stdin, os.Stdout, os.Stderr))
}

func serveWorker(in io.Reader, out, diag io.Writer) int {
	var req workerRequest
	if err := json.NewDecoder(io.LimitReader(in, 1<<20)).Decode(&req); err != nil {
		fmt.Fprintf(diag, "render worker: read the request: %v\n", err)
		return 2
	}
	if err := limitSelf(req); err != nil {
		// Said on the pipe with its reason (and on standard error, for a
		// parent that cannot read the answer).
		err = newWorkerError(fmt.Errorf("render worker: %w", err))
		fmt.Fprintf(diag, "%v\n", err)
		line, _ := json.Marshal(workerHeader{Err: toWire(err)})
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
		t, err := openTree(req.Tree, req.SHA, req.Dir, req.Limits)
		if err != nil {
			return nil, err
		}
		root := t.Root
		var h helmRequest
		if req.Helm != nil {
			h = *req.Helm
		}
		if req.Chart {
			return helm.Build(context.Background(), root, req.Dir, b, h)
		}
		return kustomize.Build(context.Background(), root, req.Dir, b, h)
	}()
	w := bufio.NewWriter(out)
	h := workerHeader{Len: int64(len(yaml))}
	for _, v := range b.SecretValues() {
		h.Sensitive = append(h.Sensitive, []byte(v))
	}
	if err != nil {
		h = workerHeader{Err: toWire(err)}
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
func limitSelf(req workerRequest) error {
	// The kernel's OOM killer takes the worker before recond.
	_ = os.WriteFile("/proc/self/oom_score_adj", []byte("1000"), 0)
	mem := req.MaxMemory
	if mem <= 0 {
		mem = DefaultWorkerMemory
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

// renderInWorker builds the kustomization at s.dir of t (helm nil) or
// renders the chart there in a worker process, which opens t again where
// its source keeps it, and returns its YAML output.
func (s *Source) renderInWorker(ctx context.Context, t *fetch.Tree, b *render.Budget, label string, helm *helmRequest, chart bool) ([]byte, error) {
	w := s.cfg.Worker
	mem := w.MaxMemory
	if mem <= 0 {
		mem = DefaultWorkerMemory
	}
	lim := b.Limits()
	keys, keysFile, keysErr := b.Keys()
	req := workerRequest{Tree: t.Reopen, SHA: t.Rev, Dir: s.dir, Limits: lim, MaxMemory: mem, Helm: helm, Chart: chart,
		AgeKeys: keys, KeysFile: keysFile}
	if keysErr != nil {
		req.KeysErr = keysErr.Error()
	}
	if d, ok := ctx.Deadline(); ok {
		// A backstop only: the worker is killed at the deadline. CPU time
		// counts every thread, so that is every core's for that long.
		req.CPU = (int64(math.Ceil(time.Until(d).Seconds())) + 5) * int64(max(runtime.NumCPU(), 1))
	}
	body, _ := json.Marshal(req)

	// PR_SET_PDEATHSIG fires when the thread that started the worker ends,
	// not the process: keep this goroutine on its thread until the worker
	// is gone.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := time.Now()
	cmd, stdout, stderr, err := w.start(body, mem)
	if err != nil {
		return nil, newWorkerError(fmt.Errorf("start the render worker %s: %w", w.Path, err))
	}
	type answer struct {
		out       []byte
		sensitive []string
		err       error
	}
	read := make(chan answer, 1)
	go func() {
		out, sensitive, err := readAnswer(stdout, lim.WithDefaults().MaxBytes, label)
		read <- answer{out, sensitive, err}
	}()
	var ans answer
	select {
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("%w after %s: %w", ErrRenderKilled, time.Since(start).Round(time.Millisecond), ctx.Err())
	case ans = <-read:
	}
	if ans.err == nil || errors.Is(ans.err, errNoAnswer) {
		// The answer was read whole, or the worker closed its output
		// without writing any (it is exiting): wait for the exit.
		werr := cmd.Wait()
		if ans.err == nil {
			if err := b.AddSensitive(ans.sensitive...); err != nil {
				return nil, &ManifestError{File: label, Err: err}
			}
			return ans.out, nil
		}
		return nil, workerDied(werr, stderr.String(), mem, req.CPU, label)
	}
	// A malformed or oversized answer: the worker has no more to say.
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	return nil, ans.err
}

// start starts the worker with the request body on its stdin, in a network
// namespace of its own unless the platform refused one.
func (w *Worker) start(body []byte, mem int64) (*exec.Cmd, io.ReadCloser, *headBuffer, error) {
	isolated := !w.noNetNS.Load()
	cmd, stdout, stderr, err := w.startOnce(body, mem, isolated)
	if err == nil || !isolated || !(errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL) ||
		errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EUSERS)) {
		return cmd, stdout, stderr, err
	}
	// Refused: without a namespace. Only when that starts is the refusal
	// the namespace's (not, say, a binary on a noexec mount), and kept.
	cmd, stdout, stderr, err2 := w.startOnce(body, mem, false)
	if err2 != nil {
		return nil, nil, nil, err2
	}
	w.noNetNS.Store(true)
	w.warned.Do(func() {
		if w.Log != nil {
			w.Log.Warn("the render worker runs without a network namespace of its own: the platform refused one "+
				"(kustomize is sealed in code all the same)", "error", err.Error())
		}
	})
	return cmd, stdout, stderr, nil
}

func (w *Worker) startOnce(body []byte, mem int64, isolated bool) (*exec.Cmd, io.ReadCloser, *headBuffer, error) {
	cmd := exec.Command(w.Path)
	// An environment of its own: nothing of recond's reaches it.
	cmd.Env = []string{workerEnv + "=1", "GOMEMLIMIT=" + strconv.FormatInt(mem/4*3, 10), "GOTRACEBACK=none"}
	cmd.Stdin = bytes.NewReader(body)
	stderr := &headBuffer{max: 16 << 10}
	cmd.Stderr = stderr
	cmd.WaitDelay = time.Second
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	attr := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if isolated {
		attr.Cloneflags = syscall.CLONE_NEWNET
		if os.Geteuid() != 0 {
			uid, gid := os.Getuid(), os.Getgid()
			attr.Cloneflags |= syscall.CLONE_NEWUSER
			attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
			attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
		}
	}
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		return nil, nil, nil, err
	}
	return cmd, stdout, stderr, nil
}

// workerError is the worker failing for a reason of its own (it could not
// start, or set itself up): neither the commit's nor the clone's.
type workerError struct{ err error }

func (e *workerError) Error() string { return e.err.Error() }
func (e *workerError) Unwrap() error { return e.err }

// newWorkerError is err as a *workerError, in an *Error with the reason
// its cause gives (workerReason), when it gives one.
func newWorkerError(err error) error {
	we := &workerError{err}
	if r := workerReason(err); r != "" {
		return &Error{Reason: r, Err: we}
	}
	return we
}

// workerReason is why the worker could not start or set itself up, in
// the loop's closed set of reasons: the platform refusing what it asks
// (an executable that may not run, a limit or namespace it may not have)
// is forbidden; its executable gone (replaced by an upgrade) is
// not_found; the machine out of processes, memory or file descriptors is
// unavailable, as it passes. Anything else has none ("": reason other).
func workerReason(err error) Reason {
	switch {
	case errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EACCES):
		return ReasonForbidden
	case errors.Is(err, syscall.ENOENT):
		return ReasonNotFound
	case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.ENOMEM), errors.Is(err, syscall.ETXTBSY):
		return ReasonUnavailable
	}
	return Reason(transient.Reason(err))
}

// errNoAnswer is a worker that closed its output without an answer: it
// died; how is in its exit status.
var errNoAnswer = errors.New("no answer")

// readAnswer reads the worker's header line and output, refusing an
// output over maxBytes.
func readAnswer(r io.Reader, maxBytes int64, label string) ([]byte, []string, error) {
	// The header carries the decrypted values too: at most what was read.
	br := bufio.NewReader(io.LimitReader(r, 2*maxBytes+(1<<20)))
	line, err := br.ReadBytes('\n')
	if err != nil {
		if errors.Is(err, io.EOF) && len(line) == 0 {
			return nil, nil, errNoAnswer
		}
		// Cut short, or longer than any answer may be: the caller kills
		// the worker, which may still be writing.
		return nil, nil, fmt.Errorf("read the render worker's answer (%d bytes of its first line): %w", len(line), err)
	}
	var h workerHeader
	if err := json.Unmarshal(line, &h); err != nil {
		return nil, nil, fmt.Errorf("read the render worker's answer: %w", err)
	}
	if h.Err != nil {
		return nil, nil, h.Err.err()
	}
	if h.Len < 0 || h.Len > maxBytes {
		return nil, nil, newLimitError(LimitBytes, h.Len, maxBytes, label)
	}
	out := make([]byte, h.Len)
	if _, err := io.ReadFull(br, out); err != nil {
		return nil, nil, fmt.Errorf("read the render worker's answer: %w", err)
	}
	sensitive := make([]string, len(h.Sensitive))
	for i, v := range h.Sensitive {
		sensitive[i] = string(v)
	}
	return out, sensitive, nil
}

// workerDied explains a worker that exited without an answer. Running out
// of its memory is a LimitError; any other death while rendering the
// commit (a stack overflow, a fatal runtime error) is the commit's, since
// the same commit would do it again.
func workerDied(werr error, stderr string, mem, cpu int64, label string) error {
	var ee *exec.ExitError
	if !errors.As(werr, &ee) {
		if werr == nil {
			werr = errors.New("it exited without an answer")
		}
		return newWorkerError(fmt.Errorf("render worker: %w", werr))
	}
	first := causeLine(stderr)
	if strings.Contains(stderr, "out of memory") || strings.Contains(stderr, "cannot allocate memory") ||
		strings.Contains(stderr, "failed to allocate") {
		return newLimitError(LimitMemory, mem+1, mem, label)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		switch ws.Signal() {
		case syscall.SIGKILL:
			if used := ee.UserTime() + ee.SystemTime(); cpu > 0 && used >= time.Duration(cpu-1)*time.Second {
				// The CPU-time backstop (Go ignores SIGXCPU; the hard
				// limit kills): a render that outlived its deadline.
				return fmt.Errorf("%w: it used its CPU time backstop (%s): %w", ErrRenderKilled, used.Round(time.Second), context.DeadlineExceeded)
			}
			// Not recond (it kills only once ctx is done): the kernel's
			// OOM killer, which takes the worker first (OOM score 1000).
			return &ManifestError{File: label, Err: fmt.Errorf("the render worker was killed (SIGKILL), most likely by the kernel "+
				"for want of memory: the container's memory limit is lower than %s (%d) allows", render.LimitFlag(LimitMemory), mem)}
		}
	}
	if strings.HasPrefix(first, "render worker:") {
		// The worker's own setup failed (it says why on the pipe; this is
		// a worker that could not): not the commit's fault.
		return newWorkerError(errors.New(first))
	}
	if first == "" {
		first = ee.Error()
	}
	return &ManifestError{File: label, Err: fmt.Errorf("the render worker crashed: %s", first)}
}

// causeLine is the line of the worker's standard error that says why it
// died: its own, or the Go runtime's; else the last one (kustomize writes
// warnings there too).
func causeLine(s string) string {
	var last string
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		for _, p := range []string{"render worker:", "fatal error:", "panic:", "runtime:"} {
			if strings.HasPrefix(l, p) {
				return l
			}
		}
		if l != "" && !strings.HasPrefix(l, "# Warning") {
			last = l
		}
	}
	return last
}

// headBuffer keeps the first max bytes written to it.
type headBuffer struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
}

func (t *headBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if room := t.max - t.buf.Len(); room > 0 {
		t.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (t *headBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.String()
}
