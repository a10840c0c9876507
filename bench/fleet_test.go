package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"recond.dev/recond/internal/testenv"
)

const (
	fleetBegin = "<!-- recond-fleet: begin -->"
	fleetEnd   = "<!-- recond-fleet: end -->"
)

var (
	// fleetObjects is each namespace's repository (the mix of manifests);
	// RECOND_BENCH_FLEET_OBJECTS changes it.
	fleetObjects = envInt("RECOND_BENCH_FLEET_OBJECTS", 90)
	// fleetInterval is each process's --interval: short, so that list mode
	// ticks several times in the steady state and its cost shows.
	fleetInterval = envDuration("RECOND_BENCH_FLEET_INTERVAL", 30*time.Second)
)

func envDuration(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// fleetRun is one observe mode's steady state.
type fleetRun struct {
	Mode       string
	Procs      int
	Steady     time.Duration
	ReqPerSec  float64
	ByVerb     map[string]float64 // requests per second by verb
	APICPU     float64            // kube-apiserver CPU, cores
	RSSMax     uint64             // the largest recond's VmRSS at the end
	RSSMean    uint64
	RSSStart   uint64 // mean VmRSS when the steady state began
	HWMMax     uint64
	TicksTotal int
}

// TestFleet runs RECOND_BENCH_FLEET (default 20) `recond run` processes,
// each holding its own namespace against its own repository, on one API
// server, first with --observe=list and then with --observe=watch, and
// measures the steady state (RECOND_BENCH_STEADY, default 2m; also
// RECOND_BENCH_FLEET_OBJECTS, _INTERVAL and _MODES=list,watch): API requests
// per second (kube-apiserver's apiserver_request_total), kube-apiserver CPU
// (/proc/<pid>/stat) and each recond's RSS. From it, what 1,000 namespaces
// would cost on paper. Part of `make bench`, never of `make test`.
func TestFleet(t *testing.T) {
	if os.Getenv("RECOND_BENCH") != "1" {
		t.Skip("set RECOND_BENCH=1 (make bench)")
	}
	procs := envInt("RECOND_BENCH_FLEET", 20)
	if procs <= 0 {
		t.Skip("RECOND_BENCH_FLEET=0")
	}
	steady := 2 * time.Minute
	if v, err := time.ParseDuration(os.Getenv("RECOND_BENCH_STEADY")); err == nil {
		steady = v
	}
	bin := filepath.Join(t.TempDir(), "recond")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/recond").CombinedOutput(); err != nil {
		t.Fatalf("build recond: %v\n%s", err, out)
	}
	cp, err := testenv.StartControlPlane()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cp.Stop() }()
	kubeconfig := cp.WriteKubeConfig(t)
	apiPID, err := apiserverPID(cp.Config.Host)
	if err != nil {
		t.Fatal(err)
	}

	var runs []fleetRun
	modes := []string{"list", "watch"}
	if v := os.Getenv("RECOND_BENCH_FLEET_MODES"); v != "" {
		modes = strings.Split(v, ",")
	}
	for _, mode := range modes {
		r := fleet(t, cp, bin, kubeconfig, apiPID, mode, procs, steady)
		t.Logf("%s: %d processes, %.1f requests/s (%v), kube-apiserver %.3f cores, recond RSS max %s mean %s (mean %s when the window began), VmHWM max %s",
			mode, procs, r.ReqPerSec, r.ByVerb, r.APICPU, fmtMiB(r.RSSMax), fmtMiB(r.RSSMean), fmtMiB(r.RSSStart), fmtMiB(r.HWMMax))
		runs = append(runs, r)
	}
	section := renderFleet(runs)
	t.Log("\n" + section)
	if dir := os.Getenv("RECOND_BENCH_DOCS"); dir != "" {
		if err := replaceSection(filepath.Join(dir, "performance.md"), fleetBegin, fleetEnd, section); err != nil {
			t.Fatal(err)
		}
	}
}

// fleet starts procs processes in mode, waits for each to converge, and
// measures the steady state.
func fleet(t *testing.T, cp *testenv.ControlPlane, bin, kubeconfig string, apiPID int, mode string, procs int, steady time.Duration) fleetRun {
	t.Helper()
	ctx := context.Background()
	type proc struct {
		cmd *exec.Cmd
		log *lockedBuffer
	}
	var ps []proc
	defer func() {
		for _, p := range ps {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
		}
		for _, p := range ps {
			_ = p.cmd.Wait()
		}
	}()
	for i := range procs {
		ns := fmt.Sprintf("fleet-%s-%02d", mode, i)
		if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		repo := testenv.NewRepo(t)
		repo.Commit("fleet", manifests(fleetObjects))
		log := &lockedBuffer{}
		cmd := exec.Command(bin, "run", "--repo", repo.URL(), "--namespace", ns, "--kubeconfig", kubeconfig,
			"--observe", mode, "--interval", fleetInterval.String(), "--listen", "", "--log-format", "json",
			"--cache-dir", t.TempDir())
		cmd.Stderr = log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ps = append(ps, proc{cmd, log})
	}
	deadline := time.Now().Add(5 * time.Minute)
	for _, p := range ps {
		for !strings.Contains(p.log.String(), `"outcome":"converged"`) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: a process never converged; log:\n%s", mode, p.log.String())
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	// The first tick of the first process: the first sync.
	for _, line := range strings.Split(ps[0].log.String(), "\n") {
		if strings.Contains(line, `"msg":"tick"`) {
			t.Logf("%s: first tick of namespace %s: %s", mode, ps[0].cmd.Args[5], line)
			break
		}
	}
	reqs0, err := apiserverRequests(ctx, cp)
	if err != nil {
		t.Fatal(err)
	}
	cpu0, err := cpuSeconds(apiPID)
	if err != nil {
		t.Fatal(err)
	}
	ticks0 := 0
	var rss0 uint64
	for _, p := range ps {
		ticks0 += strings.Count(p.log.String(), `"msg":"tick"`)
		rss0 += pidStatus(p.cmd.Process.Pid, "VmRSS")
	}
	start := time.Now()
	time.Sleep(steady)
	elapsed := time.Since(start).Seconds()
	reqs1, err := apiserverRequests(ctx, cp)
	if err != nil {
		t.Fatal(err)
	}
	cpu1, err := cpuSeconds(apiPID)
	if err != nil {
		t.Fatal(err)
	}
	r := fleetRun{Mode: mode, Procs: procs, Steady: steady, ByVerb: map[string]float64{}, APICPU: (cpu1 - cpu0) / elapsed}
	for verb, n := range reqs1 {
		if d := n - reqs0[verb]; d > 0 {
			r.ByVerb[verb] = d / elapsed
			r.ReqPerSec += d / elapsed
		}
	}
	var sum uint64
	for _, p := range ps {
		rss := pidStatus(p.cmd.Process.Pid, "VmRSS")
		sum += rss
		r.RSSMax = max(r.RSSMax, rss)
		r.HWMMax = max(r.HWMMax, pidStatus(p.cmd.Process.Pid, "VmHWM"))
		r.TicksTotal += strings.Count(p.log.String(), `"msg":"tick"`)
	}
	r.TicksTotal -= ticks0
	r.RSSMean = sum / uint64(len(ps))
	r.RSSStart = rss0 / uint64(len(ps))
	return r
}

// apiserverRequests sums kube-apiserver's apiserver_request_total by verb.
func apiserverRequests(ctx context.Context, cp *testenv.ControlPlane) (map[string]float64, error) {
	body, err := cp.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver /metrics: %w", err)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		labels, value, ok := strings.Cut(line[len("apiserver_request_total{"):], "} ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		verb := "other"
		for _, l := range strings.Split(labels, ",") {
			if k, val, ok := strings.Cut(l, "="); ok && k == "verb" {
				verb = strings.Trim(val, `"`)
			}
		}
		out[verb] += v
	}
	return out, sc.Err()
}

// apiserverPID finds the kube-apiserver serving host (https://127.0.0.1:PORT).
func apiserverPID(host string) (int, error) {
	host = strings.TrimRight(host, "/")
	port := host[strings.LastIndex(host, ":")+1:]
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if len(args) == 0 || filepath.Base(args[0]) != "kube-apiserver" {
			continue
		}
		for _, a := range args {
			if a == "--secure-port="+port {
				return pid, nil
			}
		}
	}
	return 0, fmt.Errorf("no kube-apiserver process with --secure-port=%s", port)
}

// cpuSeconds is a process's user and system CPU time.
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command name, which is in parentheses.
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100, nil // USER_HZ is 100 on Linux
}

// pidStatus reads a "kB" field of /proc/<pid>/status, in bytes.
func pidStatus(pid int, field string) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

func renderFleet(runs []fleetRun) string {
	var b strings.Builder
	b.WriteString(fleetBegin + "\n## A fleet on one API server\n\n")
	if len(runs) > 0 {
		r := runs[0]
		fmt.Fprintf(&b, "`make bench` (or `RECOND_BENCH=1 go test -count=1 -timeout 40m -run TestFleet -v ./bench/`): %d `recond run`\n", r.Procs)
		fmt.Fprintf(&b, "processes (the binary, leader election on), each holding its own namespace of %d objects against its own\n", fleetObjects)
		fmt.Fprintf(&b, "repository, `--interval %s`, on one kube-apiserver; after every process converged, %s of steady\n", fleetInterval, r.Steady)
		b.WriteString("state. Requests are kube-apiserver's own `apiserver_request_total` (every client, the leases included),\n")
		b.WriteString("CPU is kube-apiserver's (/proc/<pid>/stat), RSS each recond's. Same machine note as above.\n\n")
	}
	b.WriteString("| observe | processes | ticks in the window | API requests/s | by verb | kube-apiserver CPU | recond RSS, mean / max (VmHWM max) | mean RSS when the window began |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range runs {
		verbs := make([]string, 0, len(r.ByVerb))
		for v := range r.ByVerb {
			verbs = append(verbs, v)
		}
		sort.Slice(verbs, func(i, j int) bool { return r.ByVerb[verbs[i]] > r.ByVerb[verbs[j]] })
		var parts []string
		for _, v := range verbs {
			parts = append(parts, fmt.Sprintf("%s %.2f", v, r.ByVerb[v]))
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %.2f | %s | %.3f cores | %s / %s (%s) | %s |\n", r.Mode, r.Procs, r.TicksTotal, r.ReqPerSec,
			strings.Join(parts, ", "), r.APICPU, fmtMiB(r.RSSMean), fmtMiB(r.RSSMax), fmtMiB(r.HWMMax), fmtMiB(r.RSSStart))
	}
	b.WriteString("\nOn paper, for 1,000 namespaces (one recond each, the same repositories and interval; linear in the\n")
	b.WriteString("number of processes, which is what both modes' per-namespace requests are):\n\n")
	b.WriteString("| observe | API requests/s | kube-apiserver CPU |\n|---|---|---|\n")
	for _, r := range runs {
		f := 1000 / float64(r.Procs)
		fmt.Fprintf(&b, "| %s | %.0f | %.2f cores |\n", r.Mode, r.ReqPerSec*f, r.APICPU*f)
	}
	b.WriteString("\nIn watch mode the steady state costs the API server the open watches (one per kind and namespace,\n")
	b.WriteString("renewed every 5-10 minutes, relisted every 30-45 minutes) and the leases; in list mode, besides the\n")
	b.WriteString("leases, one LIST per kind and namespace at every interval, which grows with the objects listed.\n")
	b.WriteString("The PUTs are the Lease renewals (one per process every `--leader-elect-retry-period`, 2 s): at this\n")
	b.WriteString("size they are most of the requests in both modes. A single replica can run with\n")
	b.WriteString("`--leader-elect=false`, or a fleet can renew less often (e.g. a retry period of 10 s, renew\n")
	b.WriteString("deadline 30 s, lease 60 s, at the price of a slower takeover).\n")
	b.WriteString(fleetEnd + "\n")
	return b.String()
}

// replaceSection replaces the text between begin and end in the file at
// path (the markers included) with section, or appends it.
func replaceSection(path, begin, end, section string) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	doc := string(old)
	if i, j := strings.Index(doc, begin), strings.Index(doc, end); i >= 0 && j > i {
		doc = doc[:i] + section + strings.TrimPrefix(doc[j+len(end):], "\n")
	} else {
		doc = strings.TrimRight(doc, "\n") + "\n\n" + section
	}
	return os.WriteFile(path, []byte(doc), 0o644)
}

// lockedBuffer is a bytes.Buffer safe for a process writing while the test
// reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
