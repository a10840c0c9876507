package faults

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Recond is one recond process of a test: its log (JSON lines), its HTTP
// address and its exit.
type Recond struct {
	t    testing.TB
	cmd  *exec.Cmd
	Addr string // http://127.0.0.1:PORT, once it serves

	mu     sync.Mutex
	lines  []Line
	raw    bytes.Buffer
	exited chan struct{}
	state  *os.ProcessState
	Start  time.Time
}

// Line is one JSON log line of recond.
type Line map[string]any

// Msg is the line's message.
func (l Line) Msg() string { return l.Str("msg") }

// Str is the string value of key ("" when absent).
func (l Line) Str(key string) string {
	switch v := l[key].(type) {
	case string:
		return v
	case nil:
		return ""
	default:
		return fmt.Sprint(v)
	}
}

// Num is the numeric value of key (0 when absent).
func (l Line) Num(key string) float64 {
	v, _ := l[key].(float64)
	return v
}

// Time is when the line was written.
func (l Line) Time() time.Time {
	t, _ := time.Parse(time.RFC3339Nano, l.Str("time"))
	return t
}

// Tick is a tick summary line.
type Tick struct {
	Line
	ID                                     uint64
	Outcome, Phase, Reason, Trigger, Error string
}

// Failed reports whether the tick failed.
func (t Tick) Failed() bool { return t.Outcome == "failed" }

func (t Tick) String() string {
	s := fmt.Sprintf("tick %d (%s) %s", t.ID, t.Trigger, t.Outcome)
	if t.Failed() {
		s += fmt.Sprintf(" in %s, reason %s: %s", t.Phase, t.Reason, t.Error)
	}
	return s
}

// Base is the flags every test starts from: JSON logs, a private cache
// directory, an ephemeral port, a 1 s interval, and the instance's own
// kubeconfig and namespace.
func Base(t testing.TB, repoURL, ns, kubeconfig string) []string {
	return []string{"run", "--repo", repoURL, "--namespace", ns, "--kubeconfig", kubeconfig,
		"--log-format", "json", "--cache-dir", t.TempDir(), "--listen", "127.0.0.1:0",
		"--interval", "1s", "--leader-elect=false"}
}

// StartRecond starts the recond binary with args (the first one is the
// command: run, sync, diff) and waits, for `run`, until it serves HTTP. The
// process is killed when the test ends; its log is shown if the test
// failed.
func StartRecond(t testing.TB, args ...string) *Recond {
	t.Helper()
	cp.Require(t)
	r := &Recond{t: t, exited: make(chan struct{})}
	r.cmd = exec.Command(recondBin, args...)
	r.cmd.Env = append(os.Environ(), "GOTRACEBACK=all")
	stderr, err := r.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	r.cmd.Stdout = io.Discard
	r.Start = time.Now()
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("start recond: %v", err)
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			b := sc.Bytes()
			var l Line
			r.mu.Lock()
			r.raw.Write(b)
			r.raw.WriteByte('\n')
			if json.Unmarshal(b, &l) == nil {
				r.lines = append(r.lines, l)
			}
			r.mu.Unlock()
		}
	}()
	go func() {
		<-read
		_ = r.cmd.Wait()
		r.mu.Lock()
		r.state = r.cmd.ProcessState
		r.mu.Unlock()
		close(r.exited)
	}()
	t.Cleanup(func() {
		_ = r.cmd.Process.Kill()
		<-r.exited
		if t.Failed() {
			r.mu.Lock()
			log := r.raw.String()
			r.mu.Unlock()
			if len(log) > 200_000 {
				log = "...\n" + log[len(log)-200_000:]
			}
			t.Logf("recond log:\n%s", log)
		}
	})
	if len(args) > 0 && args[0] == "run" && hasListen(args) {
		l := r.WaitLine(60*time.Second, func(l Line) bool { return l.Msg() == "serving" })
		r.Addr = "http://" + l.Str("address")
	}
	return r
}

func hasListen(args []string) bool {
	for i, a := range args {
		if a == "--listen" && i+1 < len(args) {
			return args[i+1] != ""
		}
		if strings.HasPrefix(a, "--listen=") {
			return a != "--listen="
		}
	}
	return true
}

// Lines returns the log lines so far.
func (r *Recond) Lines() []Line {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Line(nil), r.lines...)
}

// Log is the whole log so far, as written.
func (r *Recond) Log() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.raw.String()
}

// Ticks returns the tick lines so far, in order.
func (r *Recond) Ticks() []Tick {
	var out []Tick
	for _, l := range r.Lines() {
		if l.Msg() != "tick" {
			continue
		}
		out = append(out, Tick{Line: l, ID: uint64(l.Num("tick_id")), Outcome: l.Str("outcome"), Phase: l.Str("phase"),
			Reason: l.Str("reason"), Trigger: l.Str("trigger"), Error: l.Str("error")})
	}
	return out
}

// LastTick is the last tick line (ID 0 when there is none yet).
func (r *Recond) LastTick() Tick {
	ts := r.Ticks()
	if len(ts) == 0 {
		return Tick{}
	}
	return ts[len(ts)-1]
}

// minWait is the least time a wait of the harness (WaitLine, WaitTick,
// Recovery) gives up after, whatever timeout its caller asked for. A
// wait's timeout guards against a hang; it is never a bound (the bounds are
// in ticks, events and state), so a busy machine must not reach it.
const minWait = time.Minute

// WaitLine waits up to timeout (at least minWait) for a log line that ok
// accepts (earlier lines count) and returns the first one. It fails the
// test if recond exits or the time is up.
func (r *Recond) WaitLine(timeout time.Duration, ok func(Line) bool) Line {
	r.t.Helper()
	timeout = max(timeout, minWait)
	deadline := time.Now().Add(timeout)
	for {
		for _, l := range r.Lines() {
			if ok(l) {
				return l
			}
		}
		select {
		case <-r.exited:
			r.t.Fatalf("recond exited (%v) while waiting for a log line", r.state)
		default:
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("no such log line after %s", timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitTick waits up to timeout (at least minWait) for a tick with an ID
// above after that ok accepts, and returns it. It fails the test if recond
// exits or the time is up, naming the last tick.
func (r *Recond) WaitTick(timeout time.Duration, after uint64, ok func(Tick) bool) Tick {
	r.t.Helper()
	timeout = max(timeout, minWait)
	deadline := time.Now().Add(timeout)
	for {
		for _, tk := range r.Ticks() {
			if tk.ID > after && ok(tk) {
				return tk
			}
		}
		select {
		case <-r.exited:
			r.t.Fatalf("recond exited (%v) while waiting for a tick; last: %s", r.state, r.LastTick())
		default:
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("no such tick after %s; last: %s", timeout, r.LastTick())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Succeeded accepts a tick that did not fail.
func Succeeded(t Tick) bool { return !t.Failed() }

// Converged accepts a tick that found nothing to change.
func Converged(t Tick) bool { return t.Outcome == "converged" }

// FailedIn accepts a tick that failed in phase with reason ("" for any).
func FailedIn(phase, reason string) func(Tick) bool {
	return func(t Tick) bool {
		return t.Failed() && t.Phase == phase && (reason == "" || t.Reason == reason)
	}
}

// Recovery measures how long after the fault was removed (at) the loop
// recovered: the first tick above after that ok accepts. It checks that the
// recovering tick is at most within ticks of the first tick that started
// after the fault was removed (the bound, in ticks), logs the figure
// ("recovered in") and returns it.
func (r *Recond) Recovery(name string, at time.Time, after uint64, within int, timeout time.Duration, ok func(Tick) bool) time.Duration {
	r.t.Helper()
	tk := r.WaitTick(timeout, after, ok)
	d := tk.Time().Sub(at)
	// Ticks that ended after the fault was removed, up to and including
	// the recovering one.
	n := 0
	for _, x := range r.Ticks() {
		if x.ID > after && x.ID <= tk.ID && x.Time().After(at) {
			n++
		}
	}
	if n > within {
		r.t.Errorf("%s: recovered at the %d-th tick after the fault was gone (%s), want within %d", name, n, tk, within)
	}
	r.t.Logf("fault %q: recovered in %s (%d tick(s) after the fault was gone; bound %d)", name, d.Round(time.Millisecond), n, within)
	return d
}

// Metric is the value of the series of name with labels (a subset of its
// labels) on /metrics, summed over matching series; -1 when none matches.
func (r *Recond) Metric(name string, labels map[string]string) float64 {
	r.t.Helper()
	v, err := r.metric(name, labels)
	if err != nil {
		r.t.Fatalf("metric %s: %v", name, err)
	}
	return v
}

func (r *Recond) metric(name string, labels map[string]string) (float64, error) {
	resp, err := http.Get(r.Addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	tp := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := tp.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, err
	}
	v, ok := sumFamily(fams[name], labels)
	if !ok {
		return -1, nil
	}
	return v, nil
}

// sumFamily adds the values of fam's series that carry labels (a
// histogram counts its samples); false when fam is missing or no series
// matches.
func sumFamily(fam *dto.MetricFamily, labels map[string]string) (float64, bool) {
	if fam == nil {
		return 0, false
	}
	sum, found := 0.0, false
next:
	for _, m := range fam.GetMetric() {
		have := map[string]string{}
		for _, lp := range m.GetLabel() {
			have[lp.GetName()] = lp.GetValue()
		}
		for k, v := range labels {
			if have[k] != v {
				continue next
			}
		}
		found = true
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		case m.Untyped != nil:
			sum += m.GetUntyped().GetValue()
		}
	}
	return sum, found
}

// Get is the status code of GET path (0 when the request failed).
func (r *Recond) Get(path string) int {
	c := http.Client{Timeout: 30 * time.Second}
	resp, err := c.Get(r.Addr + path)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Signal sends sig to the process.
func (r *Recond) Signal(sig os.Signal) {
	r.t.Helper()
	if err := r.cmd.Process.Signal(sig); err != nil {
		r.t.Fatalf("signal %v: %v", sig, err)
	}
}

// Wait waits up to timeout for the process to exit and returns its exit code
// (-1 when killed by a signal) and how long it took. It fails the test when
// the time is up.
func (r *Recond) Wait(timeout time.Duration) (int, time.Duration) {
	r.t.Helper()
	start := time.Now()
	select {
	case <-r.exited:
	case <-time.After(timeout):
		r.t.Fatalf("recond still running after %s", timeout)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	code := r.state.ExitCode()
	if ws, ok := r.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		code = -1
	}
	return code, time.Since(start)
}

// Exited reports whether the process has exited.
func (r *Recond) Exited() bool {
	select {
	case <-r.exited:
		return true
	default:
		return false
	}
}

// Pid is the process id.
func (r *Recond) Pid() int { return r.cmd.Process.Pid }

// Kubeconfig writes the admin kubeconfig for the test and returns its path.
func Kubeconfig(t testing.TB) string {
	cp.Require(t)
	return cp.WriteKubeConfig(t)
}

// WriteFile writes content into a new file of the test's temp dir and
// returns its path.
func WriteFile(t testing.TB, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
