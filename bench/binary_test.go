package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/internal/testenv/apiproxy"
	"recond.dev/recond/internal/testenv/tools"
)

// binaryOnce builds the recond binary once for every N of TestCompare.
var binaryOnce struct {
	sync.Once
	path string
	dir  string
}

// comparedBinary is the recond binary TestCompare runs (built once, in a
// directory removed when the process ends).
func comparedBinary(t *testing.T) string {
	t.Helper()
	binaryOnce.Do(func() {
		dir, err := os.MkdirTemp("", "recond-bench-")
		if err != nil {
			t.Fatal(err)
		}
		binaryOnce.dir, binaryOnce.path = dir, dir+"/recond"
		if out, err := exec.Command("go", "build", "-tags", "grpcnotrace", "-trimpath", "-ldflags", "-s -w", "-o", dir+"/", "../cmd/recond", "../cmd/recond-render").CombinedOutput(); err != nil {
			t.Fatalf("build recond: %v\n%s", err, out)
		}
	})
	if binaryOnce.path == "" {
		t.Fatal("recond was not built")
	}
	return binaryOnce.path
}

// tickLine is what the benchmark reads of a tick line of `recond run`.
type tickLine struct {
	Outcome  string `json:"outcome"`
	Duration string `json:"duration"`
	Healed   int    `json:"healed"`
	Quiet    bool   `json:"quiet"`
	Latency  string `json:"heal_latency"`
	Updated  int    `json:"updated"`
}

func (l tickLine) took() time.Duration {
	d, _ := time.ParseDuration(l.Duration)
	return d
}

// tickLines parses the tick lines of a JSON log.
func tickLines(log string) []tickLine {
	var out []tickLine
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, `"msg":"tick"`) {
			continue
		}
		var l tickLine
		if json.Unmarshal([]byte(line), &l) == nil {
			out = append(out, l)
		}
	}
	return out
}

// runBinary measures `recond run` as users run it: the binary, watch mode,
// every observer on (metrics and the status page served, traces exported to
// Jaeger when JAEGER_BIN is set, Events, health, the Lease in claim mode as
// deploy/base runs it), through an API proxy that counts its requests.
// Times are its tick lines' durations; --interval 1s gives a converged tick
// a second, --tick-timeout 10m a first sync in one tick as the default
// interval (3m) would.
func runBinary(t *testing.T, cp *testenv.ControlPlane, n int) run {
	bin := comparedBinary(t)
	ctx := context.Background()
	ns := cp.Namespace(t)
	repo := testenv.NewRepo(t)
	repo.Commit("objects", manifests(n))
	dyn := dynamic.NewForConfigOrDie(cp.Config)
	defer deleteAll(t, dyn, ns)
	proxy := apiproxy.Start(t, cp.Config)
	counter := newRequestCounter()
	proxy.OnRequest(counter.count)

	var env []string
	if _, err := tools.Lookup(tools.Jaeger); err == nil {
		env = append(os.Environ(), "OTEL_EXPORTER_OTLP_ENDPOINT="+testenv.StartJaeger(t).OTLPHTTP)
	}
	args := func() []string {
		return []string{"run", "--repo", repo.Dir, "--namespace", ns, "--kubeconfig", proxy.KubeConfig(t),
			"--interval", "1s", "--tick-timeout", "10m", "--observe", "watch", "--leader-elect-mode", "claim", "--log-format", "json",
			"--cache-dir", t.TempDir(), "--listen", "127.0.0.1:0"}
	}
	p := startEngineEnv(t, ns, env, bin, args()...)
	procs := []*engineProc{p}
	defer func() { stopEngines(procs) }()
	// wait returns p's tick lines once cond holds for them.
	wait := func(what string, cond func([]tickLine) bool) []tickLine {
		deadline := time.Now().Add(10 * time.Minute)
		for {
			if l := tickLines(p.log.String()); cond(l) {
				return l
			}
			if p.exited() || time.Now().After(deadline) {
				t.Fatalf("recond binary N=%d: gave up waiting for %s; log tail:\n%s", n, what, lastLines(p.log.String(), 20))
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	var r run
	lines := wait("the first converged tick", func(l []tickLine) bool {
		return len(l) > 0 && l[len(l)-1].Outcome == "converged"
	})
	for _, l := range lines[:len(lines)-1] {
		r.FirstSync += l.took()
		r.FirstPasses++
	}
	r.FirstReq = counter.snapshot()

	// Converged ticks: the requests between the first of them and the end
	// of the last are the ticks' (no Lease renewal in claim mode). The
	// window begins settle ticks after the first converged one, once the
	// first sync's Events (written in the background, at the client's
	// rate) are out.
	const settle = 3
	after := len(lines) + settle
	lines = wait("the first sync's Events to be written", func(l []tickLine) bool { return len(l) >= after })
	k := passes(modeBinary, n)
	seen := len(lines)
	before := counter.snapshot()
	lines = wait(fmt.Sprintf("%d converged ticks", k), func(l []tickLine) bool { return len(l) >= seen+k })
	r.ConvergedReq = counter.snapshot().since(before, k)
	for _, l := range lines[seen : seen+k] {
		if l.Outcome != "converged" {
			t.Errorf("recond binary N=%d: a tick of the converged window: outcome %s", n, l.Outcome)
		}
		r.ConvergedAll = append(r.ConvergedAll, l.took())
	}
	r.Converged = median(r.ConvergedAll)
	r.RSS, r.HWM = pidStatus(p.cmd.Process.Pid, "VmRSS"), pidStatus(p.cmd.Process.Pid, "VmHWM")

	// One object drifts: the tick the watch asks for heals it.
	seen = len(lines)
	before = counter.snapshot()
	if err := drift(ctx, dyn, ns, "drifted"); err != nil {
		t.Fatal(err)
	}
	lines = wait("the heal of the drift", func(l []tickLine) bool {
		return len(l) > seen && l[len(l)-1].Healed > 0
	})
	healed := lines[len(lines)-1]
	r.Drift = healed.took()
	r.DriftReq = counter.snapshot().since(before, 1)
	if healed.Updated != 1 {
		r.DriftMissed = true
		t.Errorf("recond binary N=%d: drift tick updated %d, want 1", n, healed.Updated)
	}
	if d, err := time.ParseDuration(healed.Latency); err == nil {
		r.Heal = append(r.Heal, d)
	}
	r.HealNote = "one drift; TestHealBinary measures 40"

	// The process is killed (SIGKILL: no release of the Lease); its
	// replacement claims the Lease at start and ticks.
	_ = p.cmd.Process.Kill()
	<-p.done
	killed := time.Now()
	p = startEngineEnv(t, ns, env, bin, args()...)
	procs = append(procs, p)
	wait("the replacement's first tick", func(l []tickLine) bool { return len(l) > 0 })
	r.Takeover = time.Since(killed)
	if !strings.Contains(p.log.String(), "claiming the lease from its last holder") {
		t.Errorf("recond binary N=%d: the replacement did not say it claimed the Lease from the killed process", n)
	}
	return r
}
