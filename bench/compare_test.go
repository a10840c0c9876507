package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/ssa"
	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/reconcile"
	"recond.dev/recond/reconcile/cluster"
	"recond.dev/recond/reconcile/source"
	"recond.dev/recond/reconcile/source/renderer"
)

var (
	gvrConfigMap  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	gvrService    = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	gvrDeployment = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
)

const (
	modeList  = "recond list"
	modeWatch = "recond watch"
	// modeBinary is `recond run`, the binary, in watch mode.
	modeBinary = "recond binary (watch)"
	flux4      = "Flux, 4 workers"
	flux1      = "Flux, 1 worker"
	// driftManager is the field manager of every drift the benchmark makes.
	driftManager = "drifter"
	// driftName is the ConfigMap each drift changes.
	driftName = "cm-0000"
)

// engines is the order of the rows of each N.
var engines = []string{modeList, modeWatch, modeBinary, flux4, flux1}

// run is what one engine measured at one N.
type run struct {
	Engine string
	N      int
	// Skipped says why the engine was not measured ("" when it was).
	Skipped string

	FirstSync    time.Duration // sum over the ticks (passes) until every object exists
	FirstPasses  int
	FirstReq     requests // in all, over those passes
	Converged    time.Duration
	ConvergedAll []time.Duration // every converged pass, in order
	ConvergedReq requests        // per pass
	Drift        time.Duration   // one pass after one ConfigMap drifted
	DriftMissed  bool            // that pass did not write the ConfigMap back
	DriftReq     requests
	// RSS and HWM are the benchmark process's VmRSS and VmHWM after the
	// converged passes (one process runs every engine); Heap is the live Go
	// heap the engine holds then, over what was live before it started.
	RSS, HWM, Heap uint64
	// Heal is the time from each drift to the watch event showing the
	// object restored (recond watch mode with event-triggered ticks).
	Heal     []time.Duration
	HealNote string
	// Takeover is, for the binary, from a SIGKILL of the process holding
	// the Lease to the end of its replacement's first tick.
	Takeover time.Duration
}

// TestCompare runs recond (both observe modes) and Flux's engine (4 workers
// and 1) side by side on one kube-apiserver, for each N of RECOND_BENCH_N
// (default 90,300,900,3000), and reports the tables; see the package doc.
func TestCompare(t *testing.T) {
	benchOnly(t)
	ns := []int{90, 300, 900, 3000}
	if s := os.Getenv("RECOND_BENCH_N"); s != "" {
		ns = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 3 {
				t.Fatalf("RECOND_BENCH_N=%q: want numbers of objects, at least 3", s)
			}
			ns = append(ns, n)
		}
	}
	// controller-runtime's client (Flux's engine) logs nothing here.
	ctrllog.SetLogger(logr.Discard())
	cp, err := testenv.StartControlPlane()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("stop control plane: %v", err)
		}
	})
	start := time.Now()
	var runs []run
	for _, n := range ns {
		for _, e := range engines {
			t.Run(fmt.Sprintf("%s/%d", e, n), func(t *testing.T) {
				var r run
				switch e {
				case modeList, modeWatch:
					r = runRecond(t, cp, n, e)
				case modeBinary:
					r = runBinary(t, cp, n)
				case flux4:
					r = runFlux(t, cp, n, 4)
				case flux1:
					r = runFlux(t, cp, n, 1)
				}
				r.Engine, r.N = e, n
				t.Logf("%s N=%d: first %v (%d passes), converged %v, drift %v, requests per converged pass: %s; %s",
					e, n, r.FirstSync, r.FirstPasses, r.Converged, r.Drift, r.ConvergedReq, r.Skipped)
				runs = append(runs, r)
			})
		}
	}
	elapsed := time.Since(start)
	tables := renderTables(runs)
	t.Log("\n" + tables)
	if dir := os.Getenv("RECOND_BENCH_DOCS"); dir != "" {
		if err := writeDocs(dir, tables, runs, elapsed); err != nil {
			t.Fatal(err)
		}
	}
}

// passes is how many converged passes an engine makes at N (the median is
// reported): fewer where one pass takes seconds.
func passes(engine string, n int) int {
	switch {
	case strings.HasPrefix(engine, "recond"):
		return 7
	case n >= 3000:
		return 2
	default:
		return 3
	}
}

// restFor returns the control plane's config with its transport counted.
func restFor(cp *testenv.ControlPlane) (*rest.Config, *requestCounter) {
	c := newRequestCounter()
	cfg := rest.CopyConfig(cp.Config)
	cfg.Wrap(c.wrap)
	return cfg, c
}

func runRecond(t *testing.T, cp *testenv.ControlPlane, n int, mode string) run {
	ctx := context.Background()
	ns := cp.Namespace(t)
	repo := testenv.NewRepo(t)
	repo.Commit("objects", manifests(n))
	cfg, counter := restFor(cp)
	dyn := dynamic.NewForConfigOrDie(cp.Config)
	defer deleteAll(t, dyn, ns)

	heap0 := liveHeap()
	began := time.Now()
	src, err := source.New(source.Config{Renderer: renderer.InProcess{}, URL: repo.URL(), Path: ".", CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	kube, err := cluster.New(cfg, ns)
	if err != nil {
		t.Fatal(err)
	}
	rc := reconcile.Config{Namespace: ns, Name: "recond", Path: ".", Prune: true, SelfHeal: true, ApplyConcurrency: 8}
	var live *watchLive
	if mode == modeWatch {
		l, stop, err := newWatchLive(ctx, cfg, kube, ns)
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
		live, rc.Live = l, l
	}
	rec := reconcile.New(rc, src, kube, nil)
	tick := func() *reconcile.Result {
		tctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		defer cancel()
		return rec.Tick(tctx)
	}

	var r run
	// First sync: tick until every object exists; the construction above
	// (and a watch cache's start) counts in the first tick.
	setup := time.Since(began)
	before := counter.snapshot()
	for r.FirstPasses < 20 {
		res := tick()
		r.FirstSync += res.Duration
		r.FirstPasses++
		if res.Outcome == reconcile.OutcomeFailed {
			t.Logf("first sync tick %d failed after %d writes: %v", r.FirstPasses, len(res.Ops), res.Failure())
			continue
		}
		if res.Counts.Managed >= n {
			break
		}
	}
	r.FirstSync += setup
	r.FirstReq = counter.snapshot().since(before, 1)

	// Converged ticks.
	before = counter.snapshot()
	k := passes(mode, n)
	for range k {
		res := tick()
		if res.Outcome != reconcile.OutcomeConverged {
			t.Errorf("converged tick: outcome %s (failure: %v, changes: %d)", res.Outcome, res.Failure(), len(res.Changes))
		}
		r.ConvergedAll = append(r.ConvergedAll, res.Duration)
	}
	r.ConvergedReq = counter.snapshot().since(before, k)
	r.Converged = median(r.ConvergedAll)
	r.RSS, r.HWM = procStatus("VmRSS"), procStatus("VmHWM")
	if h := liveHeap(); h > heap0 {
		r.Heap = h - heap0
	}
	runtime.KeepAlive(live)

	// One object drifts: another manager changes a ConfigMap.
	if err := drift(ctx, dyn, ns, "drifted"); err != nil {
		t.Fatal(err)
	}
	if mode == modeWatch {
		waitCacheDrifted(t, ctx, live)
	}
	before = counter.snapshot()
	res := tick()
	r.Drift = res.Duration
	r.DriftReq = counter.snapshot().since(before, 1)
	if res.Counts.Updated != 1 {
		r.DriftMissed = true
		t.Errorf("drift tick: %d updated, want 1 (outcome %s, failure %v)", res.Counts.Updated, res.Outcome, res.Failure())
	}

	if mode == modeWatch {
		r.Heal, r.HealNote = heal(t, ctx, rec, live, dyn, ns, n)
	}
	runtime.KeepAlive(rec)
	return r
}

// heal measures heal latency over 20 drifts (of 20 ConfigMaps) with the
// loop running on watch events, or says why it could not.
func heal(t *testing.T, ctx context.Context, rec *reconcile.Reconciler, live *watchLive, dyn dynamic.Interface, ns string, n int) ([]time.Duration, string) {
	stop, err := startHealing(ctx, rec, live)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	var names []string
	for i := 1; i <= 20 && i < n/3; i++ {
		names = append(names, fmt.Sprintf("cm-%04d", i))
	}
	d, err := healLatencies(ctx, dyn, ns, names)
	if err != nil {
		t.Errorf("heal latency: %v", err)
		return d, err.Error()
	}
	return d, ""
}

// waitCacheDrifted waits until the watch cache shows the drift, so that the
// drift tick measures the heal, not the event's travel.
func waitCacheDrifted(t *testing.T, ctx context.Context, live reconcile.Live) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		u, err := live.Get(ctx, schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, driftName)
		if err == nil && u != nil {
			if v, _, _ := unstructured.NestedString(u.Object, "data", "k"); v == "drifted" {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("the watch cache did not show the drift of %s within 10s", driftName)
}

// drift sets data.k of the drift ConfigMap to value as another field
// manager (a merge patch, as kubectl edit would).
func drift(ctx context.Context, dyn dynamic.Interface, ns, value string) error {
	patch := fmt.Sprintf(`{"data":{"k":%q}}`, value)
	_, err := dyn.Resource(gvrConfigMap).Namespace(ns).Patch(ctx, driftName, types.MergePatchType, []byte(patch),
		metav1.PatchOptions{FieldManager: driftManager})
	if err != nil {
		return fmt.Errorf("drift %s: %w", driftName, err)
	}
	return nil
}

func runFlux(t *testing.T, cp *testenv.ControlPlane, n, workers int) run {
	ctx := context.Background()
	ns := cp.Namespace(t)
	cfg, counter := restFor(cp)
	dyn := dynamic.NewForConfigOrDie(cp.Config)
	defer deleteAll(t, dyn, ns)

	heap0 := liveHeap()
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The field manager and owner labels kustomize-controller uses; no
	// status poller: ApplyAllStaged waits only for CRDs and Namespaces.
	m := ssa.NewResourceManager(c, nil, ssa.Owner{Field: "kustomize-controller", Group: "kustomize.toolkit.fluxcd.io"})
	m.SetConcurrency(workers)
	base, err := objects(n, ns)
	if err != nil {
		t.Fatal(err)
	}
	m.SetOwnerLabels(base, "bench", ns)
	// pass applies a fresh copy of the objects, as kustomize-controller
	// builds them anew at every reconcile, and counts the entries by action.
	pass := func() (time.Duration, map[ssa.Action]int) {
		objs := make([]*unstructured.Unstructured, len(base))
		for i, o := range base {
			objs[i] = o.DeepCopy()
		}
		pctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		defer cancel()
		start := time.Now()
		cs, err := m.ApplyAllStaged(pctx, objs, ssa.DefaultApplyOptions())
		d := time.Since(start)
		if err != nil {
			t.Fatalf("ApplyAllStaged: %v", err)
		}
		actions := map[ssa.Action]int{}
		for _, e := range cs.Entries {
			actions[e.Action]++
		}
		return d, actions
	}

	var r run
	before := counter.snapshot()
	d, actions := pass()
	r.FirstSync, r.FirstPasses = d, 1
	r.FirstReq = counter.snapshot().since(before, 1)
	if actions[ssa.CreatedAction] != n {
		t.Errorf("first apply: %v, want %d created", actions, n)
	}

	k := passes(flux4, n)
	before = counter.snapshot()
	for range k {
		d, actions := pass()
		if actions[ssa.UnchangedAction] != n {
			t.Errorf("converged pass: %v, want %d unchanged", actions, n)
		}
		r.ConvergedAll = append(r.ConvergedAll, d)
	}
	r.ConvergedReq = counter.snapshot().since(before, k)
	r.Converged = median(r.ConvergedAll)
	r.RSS, r.HWM = procStatus("VmRSS"), procStatus("VmHWM")
	if h := liveHeap(); h > heap0 {
		r.Heap = h - heap0
	}

	if err := drift(ctx, dyn, ns, "drifted"); err != nil {
		t.Fatal(err)
	}
	before = counter.snapshot()
	r.Drift, actions = pass()
	r.DriftReq = counter.snapshot().since(before, 1)
	if actions[ssa.ConfiguredAction] != 1 {
		r.DriftMissed = true
		t.Errorf("drift pass: %v, want 1 configured", actions)
	}
	runtime.KeepAlive(m)
	return r
}

// deleteAll removes the benchmark's objects from ns (the test bed runs no
// namespace controller), so that later runs find a lean server.
func deleteAll(t *testing.T, dyn dynamic.Interface, ns string) {
	for _, gvr := range []schema.GroupVersionResource{gvrConfigMap, gvrService, gvrDeployment} {
		err := dyn.Resource(gvr).Namespace(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
		if err != nil {
			t.Logf("delete %s in %s: %v", gvr.Resource, ns, err)
		}
	}
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// percentile returns the p-th percentile (nearest rank) of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(p/100*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

// liveHeap is the live Go heap after a full collection, in bytes.
func liveHeap() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// procStatus reads a "kB" field of this process's /proc status, in bytes
// (0 where there is no /proc).
func procStatus(field string) uint64 { return pidStatus(os.Getpid(), field) }
