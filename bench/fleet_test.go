package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"recond.dev/recond/internal/testenv"
)

const (
	fleetBegin = "<!-- recond-fleet: begin -->"
	fleetEnd   = "<!-- recond-fleet: end -->"

	// fluxMode is the mode that runs Flux's engine (bench/internal/fluxfleet)
	// in one process for every namespace.
	fluxMode = "flux"
	// defaultFleetModes is RECOND_BENCH_FLEET_MODES's default.
	defaultFleetModes = "list,watch,watch-claim," + fluxMode

	// etcd's counters of the writes it applies.
	etcdPut    = "etcd_mvcc_put_total"
	etcdDelete = "etcd_mvcc_delete_total"
	etcdTxn    = "etcd_mvcc_txn_total"

	// idleMode is the row of the API server alone, before any mode runs.
	idleMode = "idle"
	// idleWindow bounds the idle server's window.
	idleWindow = 30 * time.Second

	// fleetSample is how often the window samples each engine's RSS.
	fleetSample = 5 * time.Second
	// fleetMaxTicks bounds the wait for a namespace's first converged tick
	// (or reconcile) in ticks: one that made this many without converging
	// fails the benchmark.
	fleetMaxTicks = 10
	// fleetWaveTimeout bounds each wait: for a wave's first syncs, for the
	// fleet's first converged ticks, for Flux's engine's first converged
	// reconciles (with a little more per namespace).
	fleetWaveTimeout = 10 * time.Minute
)

var (
	// fleetObjects is each namespace's repository (the mix of manifests);
	// RECOND_BENCH_FLEET_OBJECTS changes it.
	fleetObjects = envInt("RECOND_BENCH_FLEET_OBJECTS", 90)
	// fleetInterval is each process's --interval (and Flux's engine's):
	// short, so that list mode ticks several times in the steady state and
	// its cost shows.
	fleetInterval = envDuration("RECOND_BENCH_FLEET_INTERVAL", 30*time.Second)
	// fleetWave is how many recond processes start at once; the next wave
	// starts when each of them converged.
	fleetWave = max(1, envInt("RECOND_BENCH_FLEET_WAVE", 10))
	// fleetModeArgs are the recond flags of each recond mode.
	fleetModeArgs = map[string][]string{
		"list":        {"--observe", "list"},
		"watch":       {"--observe", "watch"},
		"watch-claim": {"--observe", "watch", "--leader-elect-mode=claim"},
	}
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

// fleetRun is one mode's steady state.
type fleetRun struct {
	Mode       string
	Procs      int // engine processes
	Namespaces int
	Steady     time.Duration
	// Startup is from the first process's start to every namespace's
	// first converged tick.
	Startup   time.Duration
	Ticks     int // ticks (reconciles) in the window
	Failed    int // of which failed
	ReqPerSec float64
	ByVerb    map[string]float64 // requests per second by verb
	// EtcdWrites is etcd's puts and deletes per second; EtcdTxns its
	// transactions of more than one operation per second.
	EtcdWrites, EtcdTxns float64
	APICPU               float64 // kube-apiserver CPU, cores
	APIRSS0, APIRSS1     uint64  // kube-apiserver VmRSS at the window's start and end
	// RSSMean and RSSMax are over every engine process's VmRSS sampled
	// every fleetSample in the window; RSSStart the mean when the window
	// began; HWMMax the largest VmHWM at its end; PSS the sum of the
	// processes' proportional set sizes at its end.
	RSSMean, RSSMax, RSSStart, HWMMax, PSS uint64
}

// TestFleet holds RECOND_BENCH_FLEET (default 100) namespaces, each with its
// own repository of RECOND_BENCH_FLEET_OBJECTS (90) objects, on one API
// server, in turn in each mode of RECOND_BENCH_FLEET_MODES (default
// list,watch,watch-claim,flux): one `recond run` process per namespace with
// --observe=list, --observe=watch, or --observe=watch and
// --leader-elect-mode=claim, started RECOND_BENCH_FLEET_WAVE (10) at a time;
// then Flux's engine holding every namespace in one process
// (bench/internal/fluxfleet). Each mode's steady state
// (RECOND_BENCH_STEADY, default 2m, at --interval RECOND_BENCH_FLEET_INTERVAL,
// 30s) is measured: API requests per second by verb (kube-apiserver's
// apiserver_request_total), etcd writes per second (etcd's /metrics),
// kube-apiserver CPU and RSS (/proc/<pid>), and each engine process's RSS.
// From it, what 1,000 namespaces would cost on paper. Part of `make bench`,
// never of `make test`.
func TestFleet(t *testing.T) {
	benchOnly(t)
	procs := envInt("RECOND_BENCH_FLEET", 100)
	if procs <= 0 {
		t.Skip("RECOND_BENCH_FLEET=0")
	}
	steady := envDuration("RECOND_BENCH_STEADY", 2*time.Minute)
	modes := strings.Split(defaultFleetModes, ",")
	if v := os.Getenv("RECOND_BENCH_FLEET_MODES"); v != "" {
		modes = strings.Split(v, ",")
	}
	var bin, fluxBin string
	for _, mode := range modes {
		switch _, ok := fleetModeArgs[mode]; {
		case mode == fluxMode:
			if fluxBin == "" {
				fluxBin = buildFluxFleet(t)
			}
		case !ok:
			t.Fatalf("RECOND_BENCH_FLEET_MODES: unknown mode %q (want list, watch, watch-claim or %s)", mode, fluxMode)
		case bin == "":
			bin = buildRecond(t)
		}
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

	// The API server alone (its own controllers), which the figures on
	// paper take off each mode's.
	idle := measureFleet(t, cp, apiPID, nil, func() (int, int) { return 0, 0 }, min(steady, idleWindow))
	idle.Mode = idleMode
	t.Logf("idle: %.1f requests/s (%v), etcd %.2f writes/s, kube-apiserver %.3f cores, RSS %s",
		idle.ReqPerSec, idle.ByVerb, idle.EtcdWrites, idle.APICPU, fmtMiB(idle.APIRSS1))
	runs := []fleetRun{idle}
	for _, mode := range modes {
		began := time.Now()
		var r fleetRun
		if mode == fluxMode {
			r = fleetFlux(t, cp, fluxBin, kubeconfig, apiPID, procs, steady)
		} else {
			r = fleetRecond(t, cp, bin, kubeconfig, apiPID, mode, procs, steady)
		}
		t.Logf("%s: %d processes, %d namespaces, all converged after %v, %d ticks in the window (%d failed); %.1f requests/s (%v), etcd %.2f writes/s (%.2f txns/s), kube-apiserver %.3f cores, RSS %s -> %s; engine RSS mean %s max %s (mean %s when the window began), VmHWM max %s, PSS in all %s; the mode took %v",
			mode, r.Procs, r.Namespaces, r.Startup.Round(time.Second), r.Ticks, r.Failed, r.ReqPerSec, r.ByVerb, r.EtcdWrites, r.EtcdTxns,
			r.APICPU, fmtMiB(r.APIRSS0), fmtMiB(r.APIRSS1), fmtMiB(r.RSSMean), fmtMiB(r.RSSMax), fmtMiB(r.RSSStart), fmtMiB(r.HWMMax),
			fmtMiB(r.PSS), time.Since(began).Round(time.Second))
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

// engineProc is one engine process of the fleet.
type engineProc struct {
	ns   string // its namespace (recond)
	cmd  *exec.Cmd
	log  *testenv.SyncBuffer
	done chan struct{} // closed when it exited
}

func startEngine(t *testing.T, ns, bin string, args ...string) *engineProc {
	t.Helper()
	return startEngineEnv(t, ns, nil, bin, args...)
}

// startEngineEnv is startEngine with env as the process's environment
// (nil: this process's).
func startEngineEnv(t *testing.T, ns string, env []string, bin string, args ...string) *engineProc {
	t.Helper()
	p := &engineProc{ns: ns, cmd: exec.Command(bin, args...), log: &testenv.SyncBuffer{}, done: make(chan struct{})}
	p.cmd.Env = env
	p.cmd.Stderr = p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	return p
}

func (p *engineProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stopEngines stops ps (SIGTERM, then SIGKILL after 30 s) and waits for them.
func stopEngines(ps []*engineProc) {
	for _, p := range ps {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	deadline := time.After(30 * time.Second)
	for _, p := range ps {
		select {
		case <-p.done:
		case <-deadline:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
}

// fleetNamespaces creates n namespaces for mode; the returned function
// removes the objects the benchmark put in them (the test bed runs no
// namespace controller), so that the next mode finds a lean server.
func fleetNamespaces(t *testing.T, cp *testenv.ControlPlane, mode string, n int) ([]string, func()) {
	t.Helper()
	ctx := context.Background()
	var nss []string
	for i := range n {
		ns := fmt.Sprintf("fleet-%s-%03d", mode, i)
		if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		nss = append(nss, ns)
	}
	return nss, func() {
		dyn := dynamic.NewForConfigOrDie(cp.Config)
		for _, ns := range nss {
			deleteAll(t, dyn, ns)
		}
	}
}

// fleetRecond starts one recond process per namespace in mode, in waves,
// waits for each to converge, and measures the steady state.
func fleetRecond(t *testing.T, cp *testenv.ControlPlane, bin, kubeconfig string, apiPID int, mode string, procs int, steady time.Duration) fleetRun {
	t.Helper()
	nss, cleanup := fleetNamespaces(t, cp, mode, procs)
	defer cleanup()
	var ps []*engineProc
	defer func() { stopEngines(ps) }()
	began := time.Now()
	for first := 0; first < procs; first += fleetWave {
		var wave []*engineProc
		for _, ns := range nss[first:min(first+fleetWave, procs)] {
			repo := testenv.NewRepo(t)
			repo.Commit("fleet", manifests(fleetObjects))
			args := append([]string{"run", "--repo", repo.URL(), "--namespace", ns, "--kubeconfig", kubeconfig,
				"--interval", fleetInterval.String(), "--listen", "", "--log-format", "json", "--cache-dir", t.TempDir()},
				fleetModeArgs[mode]...)
			wave = append(wave, startEngine(t, ns, bin, args...))
		}
		ps = append(ps, wave...)
		waitRecond(t, mode, wave, `"outcome":"applied"`, `"outcome":"converged"`)
		t.Logf("%s: %d of %d processes synced after %v", mode, len(ps), procs, time.Since(began).Round(time.Second))
	}
	waitRecond(t, mode, ps, `"outcome":"converged"`)
	startup := time.Since(began)

	// The first tick of the first process: the first sync.
	for _, line := range strings.Split(ps[0].log.String(), "\n") {
		if strings.Contains(line, `"msg":"tick"`) {
			t.Logf("%s: first tick of namespace %s: %s", mode, ps[0].ns, line)
			break
		}
	}
	ticks := func() (n, failed int) {
		for _, p := range ps {
			for _, line := range strings.Split(p.log.String(), "\n") {
				if strings.Contains(line, `"msg":"tick"`) {
					n++
					if strings.Contains(line, `"outcome":"failed"`) {
						failed++
					}
				}
			}
		}
		return n, failed
	}
	r := measureFleet(t, cp, apiPID, ps, ticks, steady)
	r.Mode, r.Procs, r.Namespaces, r.Startup = mode, procs, procs, startup
	for _, p := range ps {
		if p.exited() {
			t.Fatalf("%s: the process of %s exited during the window; log:\n%s", mode, p.ns, p.log.String())
		}
	}
	return r
}

// waitRecond waits until each process of ps logged a tick with one of
// outcomes (its first sync: applied or converged; or its first converged
// tick); it fails the test if a process exits, ticks fleetMaxTicks times
// without one, or the wait takes fleetWaveTimeout.
func waitRecond(t *testing.T, mode string, ps []*engineProc, outcomes ...string) {
	t.Helper()
	deadline := time.Now().Add(fleetWaveTimeout)
	for _, p := range ps {
		for {
			log := p.log.String()
			if slices.ContainsFunc(outcomes, func(o string) bool { return strings.Contains(log, o) }) {
				break
			}
			switch {
			case p.exited():
				t.Fatalf("%s: the process of %s exited (%v); log:\n%s", mode, p.ns, p.cmd.ProcessState, p.log.String())
			case strings.Count(log, `"msg":"tick"`) >= fleetMaxTicks:
				t.Fatalf("%s: the process of %s ticked %d times without %s; log:\n%s", mode, p.ns, fleetMaxTicks, strings.Join(outcomes, " or "), log)
			case time.Now().After(deadline):
				t.Fatalf("%s: the process of %s logged no %s within %v; log:\n%s", mode, p.ns, strings.Join(outcomes, " or "), fleetWaveTimeout, log)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// fluxReconcile is one line of fluxfleet's log.
type fluxReconcile struct {
	Msg        string `json:"msg"`
	Level      string `json:"level"`
	Namespace  string `json:"namespace"`
	Created    int    `json:"created"`
	Configured int    `json:"configured"`
	Unchanged  int    `json:"unchanged"`
	Err        string `json:"err"`
}

func fluxReconciles(log string) []fluxReconcile {
	var out []fluxReconcile
	for _, line := range strings.Split(log, "\n") {
		var r fluxReconcile
		if json.Unmarshal([]byte(line), &r) == nil && r.Msg == "reconcile" {
			out = append(out, r)
		}
	}
	return out
}

// fleetFlux runs Flux's engine over n namespaces of the same manifests in
// one process, waits until each namespace had a reconcile that changed
// nothing, and measures the steady state.
func fleetFlux(t *testing.T, cp *testenv.ControlPlane, bin, kubeconfig string, apiPID, n int, steady time.Duration) fleetRun {
	t.Helper()
	nss, cleanup := fleetNamespaces(t, cp, fluxMode, n)
	defer cleanup()
	root := t.TempDir()
	files := manifests(fleetObjects)
	args := []string{"--kubeconfig", kubeconfig, "--interval", fleetInterval.String()}
	for _, ns := range nss {
		dir := filepath.Join(root, ns)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		args = append(args, ns+"="+dir)
	}
	began := time.Now()
	p := startEngine(t, "", bin, args...)
	defer stopEngines([]*engineProc{p})
	deadline := time.Now().Add(fleetWaveTimeout + time.Duration(n)*fleetInterval/10)
	for {
		converged, count := map[string]bool{}, map[string]int{}
		for _, r := range fluxReconciles(p.log.String()) {
			count[r.Namespace]++
			if r.Err == "" && r.Created == 0 && r.Configured == 0 && r.Unchanged > 0 {
				converged[r.Namespace] = true
			}
		}
		if len(converged) == n {
			break
		}
		for ns, c := range count {
			if c >= fleetMaxTicks && !converged[ns] {
				t.Fatalf("%s: namespace %s reconciled %d times without converging; log:\n%s", fluxMode, ns, c, p.log.String())
			}
		}
		switch {
		case p.exited():
			t.Fatalf("%s: fluxfleet exited (%v); log:\n%s", fluxMode, p.cmd.ProcessState, p.log.String())
		case time.Now().After(deadline):
			t.Fatalf("%s: %d of %d namespaces converged in %v; log:\n%s", fluxMode, len(converged), n, time.Since(began), p.log.String())
		}
		time.Sleep(500 * time.Millisecond)
	}
	startup := time.Since(began)
	ticks := func() (all, failed int) {
		for _, r := range fluxReconciles(p.log.String()) {
			all++
			if r.Err != "" {
				failed++
			}
		}
		return all, failed
	}
	r := measureFleet(t, cp, apiPID, []*engineProc{p}, ticks, steady)
	r.Mode, r.Procs, r.Namespaces, r.Startup = fluxMode, 1, n, startup
	if p.exited() {
		t.Fatalf("%s: fluxfleet exited during the window; log:\n%s", fluxMode, p.log.String())
	}
	return r
}

// measureFleet measures the steady state of the engine processes ps for
// steady; ticks counts their ticks (reconciles) so far, and the failed ones.
func measureFleet(t *testing.T, cp *testenv.ControlPlane, apiPID int, ps []*engineProc, ticks func() (int, int), steady time.Duration) fleetRun {
	t.Helper()
	c0 := readAPICounters(t, cp, apiPID)
	r := fleetRun{Steady: steady, ByVerb: map[string]float64{}, APIRSS0: pidStatus(apiPID, "VmRSS")}
	ticks0, failed0 := ticks()
	var sum, samples uint64
	start := time.Now()
	end := start.Add(steady)
	for first := true; ; first = false {
		var at uint64
		for _, p := range ps {
			rss := pidStatus(p.cmd.Process.Pid, "VmRSS")
			at += rss
			r.RSSMax = max(r.RSSMax, rss)
		}
		sum += at
		samples += uint64(len(ps))
		if first && len(ps) > 0 {
			r.RSSStart = at / uint64(len(ps))
		}
		left := time.Until(end)
		if left <= 0 {
			break
		}
		time.Sleep(min(fleetSample, left))
	}
	elapsed := time.Since(start).Seconds()
	c1 := readAPICounters(t, cp, apiPID)
	r.APIRSS1 = pidStatus(apiPID, "VmRSS")
	r.APICPU = (c1.cpu - c0.cpu) / elapsed
	for verb, n := range c1.reqs {
		if d := n - c0.reqs[verb]; d > 0 {
			r.ByVerb[verb] = d / elapsed
			r.ReqPerSec += d / elapsed
		}
	}
	for _, name := range []string{etcdPut, etcdDelete, etcdTxn} {
		if _, ok := c1.etcd[name]; !ok {
			t.Errorf("etcd's /metrics has no %s", name)
		}
	}
	r.EtcdWrites = (c1.etcd[etcdPut] - c0.etcd[etcdPut] + c1.etcd[etcdDelete] - c0.etcd[etcdDelete]) / elapsed
	r.EtcdTxns = (c1.etcd[etcdTxn] - c0.etcd[etcdTxn]) / elapsed
	ticks1, failed1 := ticks()
	r.Ticks, r.Failed = ticks1-ticks0, failed1-failed0
	if samples > 0 {
		r.RSSMean = sum / samples
	}
	for _, p := range ps {
		r.HWMMax = max(r.HWMMax, pidStatus(p.cmd.Process.Pid, "VmHWM"))
		r.PSS += pidKB(p.cmd.Process.Pid, "smaps_rollup", "Pss")
	}
	return r
}

// apiCounters is what the control plane has counted at one moment: the
// API server's requests by verb, etcd's writes (etcdPut, etcdDelete,
// etcdTxn) and the API server's CPU seconds.
type apiCounters struct {
	reqs, etcd map[string]float64
	cpu        float64
}

// readAPICounters reads the counters of cp, whose API server is the
// process apiPID.
func readAPICounters(t *testing.T, cp *testenv.ControlPlane, apiPID int) apiCounters {
	t.Helper()
	ctx := context.Background()
	var c apiCounters
	var err error
	if c.reqs, err = apiserverRequests(ctx, cp); err != nil {
		t.Fatal(err)
	}
	if c.etcd, err = cp.EtcdCounters(ctx, etcdPut, etcdDelete, etcdTxn); err != nil {
		t.Fatal(err)
	}
	if c.cpu, err = cpuSeconds(apiPID); err != nil {
		t.Fatal(err)
	}
	return c
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
func pidStatus(pid int, field string) uint64 { return pidKB(pid, "status", field) }

// pidKB reads a "kB" field of /proc/<pid>/<file> (status, smaps_rollup), in
// bytes (0 where there is none).
func pidKB(pid int, file, field string) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
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

// fleetCommand is the command line that made the figures: `make bench`, or
// go test with the settings that differ from it.
func fleetCommand() string {
	var env []string
	for _, name := range []string{"RECOND_BENCH_FLEET", "RECOND_BENCH_FLEET_OBJECTS", "RECOND_BENCH_FLEET_INTERVAL",
		"RECOND_BENCH_FLEET_MODES", "RECOND_BENCH_FLEET_WAVE", "RECOND_BENCH_STEADY"} {
		if v := os.Getenv(name); v != "" {
			env = append(env, name+"="+v)
		}
	}
	test := "go test -count=1 -timeout 40m -run '^TestFleet$' -v ./bench/"
	if len(env) == 0 {
		return "`make bench` (or `RECOND_BENCH=1 " + test + "`)"
	}
	return "`RECOND_BENCH=1 " + strings.Join(env, " ") + " " + test + "`"
}

// fleetModeDoc says what each mode runs, for the docs.
var fleetModeDoc = map[string]string{
	"list":        "one `recond run` process per namespace (the binary, leader election on) with `--observe=list`",
	"watch":       "one `recond run` process per namespace (the binary, leader election on) with `--observe=watch`",
	"watch-claim": "the same with `--observe=watch --leader-elect-mode=claim`: each process claims its Lease once at start and renews it only every third of `--leader-elect-claim-duration` (10m: never within a run)",
	fluxMode: "Flux's engine holding every namespace in one process (`bench/internal/fluxfleet`), as kustomize-controller " +
		"with one Kustomization per namespace: 4 reconciles at a time (`--concurrent`), each building the manifests " +
		"with kustomize from a fresh temporary directory, applying them with `ApplyAllStaged` and kustomize-controller's " +
		"options (4 applies at a time, `--concurrent-ssa`; a GET and a dry-run apply per object) and patching its " +
		"Kustomization's status four times (a minimal CRD), queued again an interval after it ended. It keeps no " +
		"informer caches and runs no source-controller: its memory is a floor for Flux's",
}

func renderFleet(runs []fleetRun) string {
	var idle *fleetRun
	var modes []fleetRun
	for i := range runs {
		if runs[i].Mode == idleMode {
			idle = &runs[i]
		} else {
			modes = append(modes, runs[i])
		}
	}
	var b strings.Builder
	b.WriteString(fleetBegin + "\n## A fleet on one API server\n\n")
	if len(modes) > 0 {
		r := modes[0]
		fmt.Fprintf(&b, "%s: %d namespaces\n", fleetCommand(), r.Namespaces)
		fmt.Fprintf(&b, "of %d objects, each against its own repository, `--interval %s`, on one kube-apiserver, held in turn by:\n\n", fleetObjects, fleetInterval)
		for _, r := range modes {
			fmt.Fprintf(&b, "- %s: %s.\n", r.Mode, fleetModeDoc[r.Mode])
		}
		if slices.ContainsFunc(modes, func(r fleetRun) bool { return r.Mode != fluxMode }) {
			fmt.Fprintf(&b, "\nrecond processes start %d at a time, the next wave once each of them made its first sync. ", fleetWave)
		} else {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "%s of steady state\nfollow once every namespace converged. The idle row is the API server alone, before the\n", r.Steady)
		b.WriteString("first mode. Requests are kube-apiserver's own `apiserver_request_total` (every client, the leases\n")
		b.WriteString("included); etcd writes its puts and deletes (`etcd_mvcc_put_total`, `etcd_mvcc_delete_total`);\n")
		b.WriteString("kube-apiserver's CPU and RSS are from /proc/<pid>. Engine RSS is each engine process's VmRSS, sampled\n")
		b.WriteString("every 5 s in the window; the memory in all is the sum of their proportional set sizes (`Pss`: a page\n")
		b.WriteString("the processes share counts once) at its end. Same machine note as above.\n\n")
	}
	b.WriteString("| mode | processes | namespaces | all converged after | ticks in the window (at the interval) | API requests/s | by verb | etcd writes/s | kube-apiserver CPU | kube-apiserver RSS, start → end | engine RSS per process, mean / max (VmHWM max) | memory in all (PSS) |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
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
		common := fmt.Sprintf("%.2f | %s | %.2f | %.3f cores | %s → %s", r.ReqPerSec, strings.Join(parts, ", "), r.EtcdWrites, r.APICPU, fmtMiB(r.APIRSS0), fmtMiB(r.APIRSS1))
		if r.Mode == idleMode {
			fmt.Fprintf(&b, "| %s | 0 | 0 | — | — (%s window) | %s | — | — |\n", r.Mode, r.Steady, common)
			continue
		}
		ticks := fmt.Sprintf("%d (%d)", r.Ticks, int(float64(r.Namespaces)*r.Steady.Seconds()/fleetInterval.Seconds()))
		if r.Failed > 0 {
			ticks += fmt.Sprintf(", %d failed", r.Failed)
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %s | %s | %s | %s / %s (%s) | %s |\n", r.Mode, r.Procs, r.Namespaces, r.Startup.Round(time.Second), ticks,
			common, fmtMiB(r.RSSMean), fmtMiB(r.RSSMax), fmtMiB(r.HWMMax), fmtMiB(r.PSS))
	}
	var idleReq, idleCPU float64
	if idle != nil {
		idleReq, idleCPU = idle.ReqPerSec, idle.APICPU
	}
	b.WriteString("\nOn paper, for 1,000 namespaces: each mode's requests and kube-apiserver CPU over the idle server's, per\n")
	b.WriteString("namespace, times 1,000 (the same repositories and interval; linear in the namespaces, which is what every\n")
	b.WriteString("mode's requests per namespace are, for Flux's engine only while its reconciles keep the interval):\n\n")
	b.WriteString("| mode | API requests/s per namespace | kube-apiserver CPU per 100 namespaces | 1,000 namespaces: API requests/s | kube-apiserver CPU |\n")
	b.WriteString("|---|---|---|---|---|\n")
	for _, r := range modes {
		req := max(0, r.ReqPerSec-idleReq) / float64(r.Namespaces)
		cpu := max(0, r.APICPU-idleCPU) / float64(r.Namespaces)
		fmt.Fprintf(&b, "| %s | %.3f | %.3f cores | %.0f | %.2f cores |\n", r.Mode, req, cpu*100, req*1000, cpu*1000)
	}
	b.WriteString("\nIn watch mode the steady state costs the API server the open watches (one per kind and namespace,\n")
	b.WriteString("renewed every 5-10 minutes, relisted every 30-45 minutes) and the leases; in list mode, besides the\n")
	b.WriteString("leases, one LIST per kind and namespace at every interval, which grows with the objects listed.\n")
	b.WriteString("The PUTs of list and watch are the Lease renewals (one per process every `--leader-elect-retry-period`,\n")
	b.WriteString("2 s), each an etcd write; watch-claim claims its Lease once and renews nothing. Flux's engine holds no\n")
	b.WriteString("lease per namespace but sends a GET and a dry-run apply (APPLY) per object at every interval: its\n")
	b.WriteString("requests grow with the objects held. A single replica can also run with `--leader-elect=false`, or a\n")
	b.WriteString("fleet can renew less often (e.g. a retry period of 10 s, renew deadline 30 s, lease 60 s, at the price\n")
	b.WriteString("of a slower takeover).\n")
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
