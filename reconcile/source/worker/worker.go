package worker

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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"recond.dev/recond/internal/reason"
	"recond.dev/recond/internal/transient"
	"recond.dev/recond/reconcile/source/chartspec"
	"recond.dev/recond/reconcile/source/fetch"
	"recond.dev/recond/reconcile/source/manifest"
)

// Worker runs a render in a process of its own: a render that computes
// for ever, or grows without end, cannot hold the long-lived process's
// CPU, memory or locks. The process is the render binary at Path
// (recond-render, whose main is package renderer's RunIfAsked). It opens
// the revision's tree where its source keeps it on disk (a local
// repository, a bare clone, a cache of artifacts), read-only, renders it
// (plain files, a kustomization or a chart, SOPS files decrypted) under
// the sealed file system and Limits, and writes the objects back on a
// pipe. It runs:
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
	// Path is the render binary (Options.Worker finds it and checks its
	// build).
	Path string
	// MaxMemory caps the worker's memory, in bytes (--render-max-memory);
	// 0 is DefaultMemory.
	MaxMemory int64
	// Log, when set, receives a warning when the worker cannot have a
	// network namespace of its own (once per Worker).
	Log *slog.Logger

	warned  sync.Once
	noNetNS atomic.Bool // the platform refused a new network namespace
}

// NetNSRefused reports whether the platform refused the worker a network
// namespace of its own: it then runs without one (said once in the log).
func (w *Worker) NetNSRefused() bool { return w.noNetNS.Load() }

// DefaultMemory is the memory a render worker may use when
// Worker.MaxMemory is 0.
const DefaultMemory = 1 << 30

// ErrRenderKilled is wrapped by the error of a render whose worker was
// killed because the render's context ended (its deadline, or a stop).
var ErrRenderKilled = errors.New("render stopped: its worker process was killed")

// Env marks the process as a render worker; RunIfAsked looks for it.
// The leading underscore keeps it apart from the RECOND_<FLAG> variables.
const Env = "_RECOND_RENDER_WORKER"

// Job is one render a worker does: the revision Rev of the tree its
// source keeps at Tree, the directory Dir in it (a chart's when Chart,
// else a kustomization's or plain files'), the name its errors go by
// (Label), what a chart needs (Helm; a
// kustomization's helmCharts too), the render's Limits and the age keys
// that decrypt its SOPS files, as recond read them (the worker reads
// nothing of recond's): Keys the keys file's content, KeysFile its name,
// KeysErr why it could not be read.
type Job struct {
	Tree     fetch.Location     `json:"tree"`
	Rev      string             `json:"sha"`
	Label    string             `json:"label"`
	Dir      string             `json:"dir"`
	Chart    bool               `json:"chart,omitempty"`
	Helm     *chartspec.Request `json:"helm,omitempty"`
	Limits   manifest.Limits    `json:"limits"`
	Keys     []byte             `json:"ageKeys,omitempty"`
	KeysFile string             `json:"keysFile,omitempty"`
	KeysErr  string             `json:"keysErr,omitempty"`
}

// Result is a render's outcome: the objects, the decrypted values that are
// secret wherever they appear, and for a chart what the status page says
// of it and what its render left out (CRD files, hooks recond does not
// run).
type Result struct {
	Manifests   []manifest.Manifest
	Sensitive   []string
	Chart       *chartspec.Chart
	CRDs, Hooks []string
	// PeakRSS is the render process's peak resident memory, in bytes (0
	// for a render in the calling process).
	PeakRSS int64
}

// peakRSS is an exited process's peak resident memory, in bytes.
func peakRSS(ps *os.ProcessState) int64 {
	if ps == nil {
		return 0
	}
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss << 10 // kilobytes on Linux
	}
	return 0
}

// Render runs job in a worker process, which opens the tree again where
// its source keeps it, and returns what it rendered.
func (w *Worker) Render(ctx context.Context, job Job) (*Result, error) {
	label := job.Label
	mem := w.MaxMemory
	if mem <= 0 {
		mem = DefaultMemory
	}
	lim := job.Limits.WithDefaults()
	req := request{Job: job, MaxMemory: mem}
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
		return nil, NewSetupError(fmt.Errorf("start the render worker %s: %w", w.Path, err))
	}
	type answer struct {
		res *Result
		err error
	}
	read := make(chan answer, 1)
	go func() {
		res, err := readAnswer(stdout, lim.MaxBytes, label)
		read <- answer{res, err}
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
			ans.res.PeakRSS = peakRSS(cmd.ProcessState)
			if w.Log != nil {
				w.Log.DebugContext(ctx, "render done", "render", label, "objects", len(ans.res.Manifests),
					"duration", time.Since(start).Round(time.Millisecond).String(), "peak_rss_bytes", ans.res.PeakRSS)
			}
			return ans.res, nil
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
	cmd.Env = []string{Env + "=1", "GOMEMLIMIT=" + strconv.FormatInt(mem/4*3, 10), "GOTRACEBACK=none"}
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

// SetupError is the worker failing for a reason of its own (it could not
// start, or set itself up): neither the commit's nor the clone's.
type SetupError struct{ err error }

func (e *SetupError) Error() string { return e.err.Error() }
func (e *SetupError) Unwrap() error { return e.err }

// NewSetupError is err as a *SetupError, in a *reason.Error with the
// reason its cause gives (setupReason), when it gives one.
func NewSetupError(err error) error {
	we := &SetupError{err}
	if r := setupReason(err); r != "" {
		return &reason.Error{Reason: r, Err: we}
	}
	return we
}

// setupReason is why the worker could not start or set itself up, in
// the loop's closed set of reasons: the platform refusing what it asks
// (an executable that may not run, a limit or namespace it may not have)
// is forbidden; its executable gone (replaced by an upgrade) is
// not_found; the machine out of processes, memory or file descriptors is
// unavailable, as it passes. Anything else has none ("": reason other).
func setupReason(err error) reason.Reason {
	switch {
	case errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EACCES):
		return reason.Forbidden
	case errors.Is(err, syscall.ENOENT):
		return reason.NotFound
	case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.ENOMEM), errors.Is(err, syscall.ETXTBSY):
		return reason.Unavailable
	}
	return reason.Reason(transient.Reason(err))
}

// errNoAnswer is a worker that closed its output without an answer: it
// died; how is in its exit status.
var errNoAnswer = errors.New("no answer")

// readAnswer reads the worker's header line and objects, refusing
// objects over maxBytes (what a render may produce, with room for their
// JSON and what the pipe says of each).
func readAnswer(r io.Reader, maxBytes int64, label string) (*Result, error) {
	maxBody := 2*maxBytes + (1 << 20)
	// The header carries the decrypted values too: at most what was read.
	br := bufio.NewReader(io.LimitReader(r, maxBody+2*maxBytes+(1<<20)))
	line, err := br.ReadBytes('\n')
	if err != nil {
		if errors.Is(err, io.EOF) && len(line) == 0 {
			return nil, errNoAnswer
		}
		// Cut short, or longer than any answer may be: the caller kills
		// the worker, which may still be writing.
		return nil, fmt.Errorf("read the render worker's answer (%d bytes of its first line): %w", len(line), err)
	}
	var h header
	if err := json.Unmarshal(line, &h); err != nil {
		return nil, fmt.Errorf("read the render worker's answer: %w", err)
	}
	if h.Err != nil {
		return nil, h.Err.err()
	}
	if h.Len < 0 || h.Len > maxBody {
		return nil, manifest.NewLimitError(manifest.LimitBytes, h.Len, maxBytes, label)
	}
	body := make([]byte, h.Len)
	if _, err := io.ReadFull(br, body); err != nil {
		return nil, fmt.Errorf("read the render worker's answer: %w", err)
	}
	ms, err := decodeObjects(body)
	if err != nil {
		return nil, err
	}
	res := &Result{Manifests: ms, Chart: h.Chart, CRDs: h.CRDs, Hooks: h.Hooks}
	for _, v := range h.Sensitive {
		res.Sensitive = append(res.Sensitive, string(v))
	}
	return res, nil
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
		return NewSetupError(fmt.Errorf("render worker: %w", werr))
	}
	first := causeLine(stderr)
	if strings.Contains(stderr, "out of memory") || strings.Contains(stderr, "cannot allocate memory") ||
		strings.Contains(stderr, "failed to allocate") {
		return manifest.NewLimitError(manifest.LimitMemory, mem+1, mem, label)
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
			return &manifest.ManifestError{File: label, Err: fmt.Errorf("the render worker was killed (SIGKILL), most likely by the kernel "+
				"for want of memory: the container's memory limit is lower than %s (%d) allows", manifest.LimitFlag(manifest.LimitMemory), mem)}
		}
	}
	if strings.HasPrefix(first, "render worker:") {
		// The worker's own setup failed (it says why on the pipe; this is
		// a worker that could not): not the commit's fault.
		return NewSetupError(errors.New(first))
	}
	if first == "" {
		first = ee.Error()
	}
	return &manifest.ManifestError{File: label, Err: fmt.Errorf("the render worker crashed: %s", first)}
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

// Check asks the worker's binary who it is and refuses it, with an error
// wrapping ErrBinary, when it is missing, not executable, does not answer,
// or is not of build and of this pipe's Protocol.
func (w *Worker) Check(ctx context.Context, build string) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w %s (--%s) %s", ErrBinary, w.Path, FlagRenderBinary, fmt.Sprintf(format, args...))
	}
	fi, err := os.Stat(w.Path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fail("is missing: install it beside recond (the image carries both)")
	case err != nil:
		return fail("cannot be read: %v", err)
	case !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0:
		return fail("is not an executable file (mode %s)", fi.Mode())
	}
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	body, _ := json.Marshal(request{Version: true})
	cmd := exec.CommandContext(ctx, w.Path)
	cmd.Env = []string{Env + "=1", "GOTRACEBACK=none"}
	cmd.Stdin = bytes.NewReader(body)
	stderr := &headBuffer{max: 4 << 10}
	cmd.Stderr = stderr
	out, err := cmd.Output()
	if err != nil {
		return fail("does not answer for its version: %v %s", err, strings.TrimSpace(stderr.String()))
	}
	var h header
	line, _, _ := bytes.Cut(out, []byte("\n"))
	if err := json.Unmarshal(line, &h); err != nil || h.Protocol == 0 {
		return fail("does not answer as a render binary (%q)", bytes.TrimSpace(line[:min(len(line), 200)]))
	}
	if h.Protocol != Protocol || h.Build != build {
		return fail("is of build %s (protocol %d); recond is of build %s (protocol %d): install the render binary of recond's own build",
			h.Build, h.Protocol, build, Protocol)
	}
	return nil
}

// checkTimeout bounds the start of the render binary that answers Check.
const checkTimeout = 30 * time.Second
