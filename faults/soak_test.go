package faults

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"image/color"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"recond.dev/recond/internal/testenv"
)

// The soak run's shape: how many objects of each kind, how often each kind
// of disturbance comes, and the leak margins after warm-up.
const (
	soakConfigMaps  = 255
	soakServices    = 35
	soakDeployments = 10

	soakSampleEvery = 10 * time.Second
	soakCommitEvery = time.Minute
	// A drift every 2-5 s, a webhook or manual sync every 3-8 s.
	soakDriftMin, soakDriftMax     = 2 * time.Second, 5 * time.Second
	soakTriggerMin, soakTriggerMax = 3 * time.Second, 8 * time.Second
	// An object is drifted again only after this quiet time: a second
	// revert within reconcile's fight window would be a fight, which
	// self-heal answers by backing off (another test's subject).
	soakDriftQuiet = 30 * time.Second
	// soakHealTimeout is how long a drift may stay unhealed before it
	// counts as not healed.
	soakHealTimeout = 2 * time.Minute

	soakWebhookSecret = "soak-webhook-secret"
	soakSyncToken     = "soak-sync-token"
	soakIntruder      = "soak-intruder"
)

// Leak margins: the mean of the second half of the run against the first
// sample after warm-up.
const (
	soakGoroutineMargin = 0.10 // +10 %
	soakMemoryMargin    = 0.25 // +25 % (heap and RSS)
	soakFDMargin        = 10   // +10 descriptors
)

// soakObject is one object of the soak repository and what its drift field
// has been set to in Git (any of them is a healed value).
type soakObject struct {
	kind, name string
	value      string          // the drift field's value in Git now
	replicas   int             // Deployments: spec.replicas in Git
	gitValues  map[string]bool // every value the field had in Git
	busy       bool            // a drift or a commit on it is being verified
	lastDrift  time.Time
}

func (o *soakObject) file() string { return strings.ToLower(o.kind) + "s/" + o.name + ".yaml" }

func (o *soakObject) manifest() string {
	switch o.kind {
	case "ConfigMap":
		return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  k: %s\n  fixed: \"1\"\n", o.name, o.value)
	case "Service":
		return fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata:\n  name: %s\nspec:\n  clusterIP: None\n  selector:\n    app: %s\n  ports:\n    - name: http\n      port: 80\n", o.name, o.value)
	default:
		return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %s
spec:
  replicas: %d
  selector:
    matchLabels: {app: %s}
  template:
    metadata:
      labels: {app: %s}
    spec:
      containers:
        - name: web
          image: %s
`, o.name, o.replicas, o.name, o.name, o.value)
	}
}

// soakSample is one scrape: recond's own metrics and the API server's
// count of open watches.
type soakSample struct {
	at                                 time.Duration // since recond started
	goroutines, heap, nextGC, rss, fds float64
	watches                            float64
	ticks                              float64
}

// soakDrift is one injected drift and how it ended.
type soakDrift struct {
	object  string
	deleted bool
	healed  bool
	latency time.Duration
	err     string
}

// TestSoak runs recond in watch mode for RECOND_SOAK_DURATION (default 10m)
// against 300 objects while drift is injected every few seconds (a field
// recond owns edited by another manager, or an object deleted), webhooks
// and manual syncs arrive at random and a new commit lands every minute. It
// checks that no tick fails, that every drift is healed (each injected
// change reverted in the live object) and every commit applied, and that
// goroutines, heap, RSS, open descriptors and open watches stay flat after
// warm-up: a leak check, not a speed check. It is skipped unless
// RECOND_SOAK=1; with RECOND_SOAK_DOCS set it draws the samples into
// $RECOND_SOAK_DOCS/img/soak.png.
func TestSoak(t *testing.T) {
	if os.Getenv("RECOND_SOAK") != "1" {
		t.Skip("the soak run is long: set RECOND_SOAK=1 (make soak)")
	}
	cp.Require(t)
	duration := 10 * time.Minute
	if s := os.Getenv("RECOND_SOAK_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < time.Minute {
			t.Fatalf("RECOND_SOAK_DURATION=%q: want a duration of at least 1m (%v)", s, err)
		}
		duration = d
	}
	warmUp := min(2*time.Minute, duration/4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// The repository: one file per object.
	var objs []*soakObject
	add := func(kind, prefix string, n int, value string) {
		for i := range n {
			o := &soakObject{kind: kind, name: fmt.Sprintf("%s-%03d", prefix, i), value: value, replicas: 1}
			if kind == "Service" {
				o.value = o.name
			}
			o.gitValues = map[string]bool{o.value: true}
			objs = append(objs, o)
		}
	}
	add("ConfigMap", "cm", soakConfigMaps, "v0")
	add("Service", "svc", soakServices, "")
	add("Deployment", "dep", soakDeployments, "nginx:1.27")
	files := map[string]string{}
	for _, o := range objs {
		files[o.file()] = o.manifest()
	}
	repo := testenv.NewRepo(t)
	repo.Commit("soak: initial", files)
	ns := cp.Namespace(t)

	// The Deployment controller's part: report every generation rolled out.
	var rollouts sync.WaitGroup
	var rolledOut atomic.Int64
	rollouts.Add(1)
	go func() {
		defer rollouts.Done()
		for ctx.Err() == nil {
			list, err := cp.Client.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
			if err == nil {
				for _, d := range list.Items {
					if d.Status.ObservedGeneration != d.Generation {
						if testenv.RollOut(ctx, cp.Client, ns, d.Name, testenv.RolledOut) == nil {
							rolledOut.Add(1)
						}
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	defer func() { cancel(); rollouts.Wait() }()

	watchBase, err := soakAPIWatches(ctx)
	if err != nil {
		t.Fatalf("the API server's watch count: %v", err)
	}
	token := WriteFile(t, "sync-token", soakSyncToken+"\n")
	secret := WriteFile(t, "webhook-secret", soakWebhookSecret+"\n")
	r := StartRecond(t, append(Base(t, repo.URL(), ns, Kubeconfig(t)), "--ref", "main",
		"--sync-token-file", token, "--webhook-secret-file", secret)...)
	first := r.WaitTick(2*time.Minute, 0, Succeeded)
	converged := r.WaitTick(2*time.Minute, first.ID, Converged)
	t.Logf("recond converged on %d objects %s after it started (API server watches before it: %v)",
		len(objs), time.Since(r.Start).Round(time.Millisecond), watchBase)

	var (
		mu         sync.Mutex
		drifts     []soakDrift
		applies    []time.Duration // commit to every changed object in place
		unapplied  []string
		answers    = map[string]int{} // "webhook 202", "sync 202", "GET / 200", ...
		checks     sync.WaitGroup
		samples    []soakSample
		sampleErrs []string
	)
	answer := func(what string) {
		mu.Lock()
		answers[what]++
		mu.Unlock()
	}
	// pick returns a random object that is not being verified and was not
	// drifted lately, marked busy; nil when there is none.
	pick := func(kinds ...string) *soakObject {
		mu.Lock()
		defer mu.Unlock()
		for range 50 {
			o := objs[rand.IntN(len(objs))]
			if !o.busy && time.Since(o.lastDrift) > soakDriftQuiet && (len(kinds) == 0 || slices.Contains(kinds, o.kind)) {
				o.busy = true
				return o
			}
		}
		return nil
	}
	release := func(o *soakObject) {
		mu.Lock()
		o.busy = false
		mu.Unlock()
	}

	// Drift: every 2-5 s edit the drift field of a random object as
	// another manager, or delete a random object; then wait until the live
	// object is back.
	driftSeq := 0
	inject := func() {
		o := pick()
		if o == nil {
			return
		}
		driftSeq++
		d := soakDrift{object: o.kind + "/" + o.name, deleted: rand.IntN(4) == 0}
		injected := fmt.Sprintf("drift-%d", driftSeq)
		if o.kind == "Deployment" {
			injected = "nginx:drift-" + fmt.Sprint(driftSeq)
		}
		oldUID, err := soakLiveUID(ctx, ns, o)
		if err == nil {
			err = soakDriftObject(ctx, ns, o, d.deleted, injected)
		}
		at := time.Now()
		mu.Lock()
		o.lastDrift = at
		mu.Unlock()
		if err != nil {
			// Not injected: nothing to heal.
			t.Logf("drift of %s not injected: %v", d.object, err)
			release(o)
			return
		}
		checks.Add(1)
		go func() {
			defer checks.Done()
			defer release(o)
			for deadline := at.Add(soakHealTimeout); ; time.Sleep(50 * time.Millisecond) {
				uid, value, err := soakLive(context.Background(), ns, o)
				mu.Lock()
				ok := err == nil && value != injected && o.gitValues[value] && (!d.deleted || uid != oldUID)
				mu.Unlock()
				if ok {
					d.healed, d.latency = true, time.Since(at)
					break
				}
				if time.Now().After(deadline) {
					d.err = fmt.Sprintf("live value %q, uid changed %v, error %v", value, uid != oldUID, err)
					break
				}
			}
			mu.Lock()
			drifts = append(drifts, d)
			mu.Unlock()
		}()
	}

	// Triggers: every 3-8 s a signed push delivery or a manual sync.
	hookSeq := 0
	trigger := func() {
		if rand.IntN(2) == 0 {
			hookSeq++
			code := soakSend(soakPush(r.Addr+"/hooks/git", fmt.Sprintf("soak-%d-%d", time.Now().UnixNano(), hookSeq)))
			answer(fmt.Sprintf("webhook %d", code))
			return
		}
		req, _ := http.NewRequest(http.MethodPost, r.Addr+"/api/v1/sync", nil)
		req.Header.Set("Authorization", "Bearer "+soakSyncToken)
		answer(fmt.Sprintf("sync %d", soakSend(req)))
	}

	// Commits: every minute, four ConfigMaps get a new value and one
	// Deployment another replica count; each must reach the cluster.
	commitSeq := 0
	commit := func() {
		commitSeq++
		var changed []*soakObject
		for range 20 {
			if len(changed) == 4 {
				break
			}
			if o := pick("ConfigMap"); o != nil {
				changed = append(changed, o)
			}
		}
		dep := pick("Deployment")
		if dep != nil {
			changed = append(changed, dep)
		}
		files := map[string]string{}
		mu.Lock()
		for _, o := range changed {
			if o.kind == "Deployment" {
				o.replicas = 3 - o.replicas // 1 <-> 2
			} else {
				o.value = fmt.Sprintf("rev-%d", commitSeq)
				o.gitValues[o.value] = true
			}
			files[o.file()] = o.manifest()
		}
		mu.Unlock()
		repo.Commit(fmt.Sprintf("soak: change %d", commitSeq), files)
		at := time.Now()
		checks.Add(1)
		go func() {
			defer checks.Done()
			defer func() {
				for _, o := range changed {
					release(o)
				}
			}()
			for deadline := at.Add(soakHealTimeout); ; time.Sleep(100 * time.Millisecond) {
				pending := ""
				for _, o := range changed {
					if !soakInGit(ctx, ns, o) {
						pending = o.kind + "/" + o.name
						break
					}
				}
				mu.Lock()
				if pending == "" {
					applies = append(applies, time.Since(at))
				} else if time.Now().After(deadline) {
					unapplied = append(unapplied, fmt.Sprintf("commit %d: %s", commitSeq, pending))
				}
				mu.Unlock()
				if pending == "" || time.Now().After(deadline) {
					return
				}
			}
		}()
	}

	sample := func() {
		s, err := soakScrape(ctx, r)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			sampleErrs = append(sampleErrs, fmt.Sprintf("%s: %v", time.Since(r.Start).Round(time.Second), err))
			return
		}
		samples = append(samples, s)
		// The status page and probes are served all along.
		for _, path := range []string{"/", "/api/v1/status", "/readyz"} {
			answers[fmt.Sprintf("GET %s %d", path, r.Get(path))]++
		}
	}

	// The run. Commits happen here (the repository is the test's);
	// everything else in goroutines that end with ctx.
	start := time.Now()
	runCtx, stop := context.WithTimeout(ctx, duration)
	defer stop()
	sample()
	var loops sync.WaitGroup
	for _, l := range []struct {
		lo, hi time.Duration
		f      func()
	}{{soakDriftMin, soakDriftMax, inject}, {soakTriggerMin, soakTriggerMax, trigger}, {soakSampleEvery, soakSampleEvery, sample}} {
		loops.Add(1)
		go func() {
			defer loops.Done()
			for {
				select {
				case <-runCtx.Done():
					return
				case <-time.After(l.lo + time.Duration(rand.Int64N(int64(l.hi-l.lo)+1))):
					l.f()
				}
			}
		}()
	}
	commits := time.NewTicker(soakCommitEvery)
	defer commits.Stop()
run:
	for {
		select {
		case <-runCtx.Done():
			break run
		case <-commits.C:
			commit()
		}
		if r.Exited() {
			t.Fatalf("recond exited during the soak run: %s", r.LastTick())
		}
	}
	loops.Wait()
	checks.Wait() // every drift and commit verified (or timed out)
	sample()
	elapsed := time.Since(start)
	if r.Exited() {
		t.Fatalf("recond exited during the soak run: %s", r.LastTick())
	}

	// Ticks, from the log and from /metrics.
	ticks := r.Ticks()
	outcomes := map[string]int{}
	triggers := map[string]int{}
	// Before the first convergence, the first ticks create 300 objects
	// within a tick timeout of one interval (1 s, the default): on a busy
	// machine they may run out of time, and the next tick carries on. Those
	// are counted apart; any other failure before, and any failure after,
	// is one.
	var failed, startup []string
	for _, tk := range ticks {
		outcomes[tk.Outcome]++
		triggers[tk.Trigger]++
		switch {
		case !tk.Failed():
		case tk.ID < converged.ID && tk.Reason == "timeout":
			startup = append(startup, tk.String())
		default:
			failed = append(failed, tk.String())
		}
	}
	healedByRecond := r.Metric("recond_heal_latency_seconds", nil)
	fights := r.Metric("recond_self_heal_conflicts_total", nil)
	var lat []time.Duration
	var notHealed []string
	deletes := 0
	for _, d := range drifts {
		if d.deleted {
			deletes++
		}
		if d.healed {
			lat = append(lat, d.latency)
		} else {
			notHealed = append(notHealed, fmt.Sprintf("%s (deleted %v): %s", d.object, d.deleted, d.err))
		}
	}

	// Figures.
	var b strings.Builder
	fmt.Fprintf(&b, "Soak run: %s of drift, triggers and commits after the first convergence (%d objects: %d ConfigMaps, %d Services, %d Deployments), warm-up %s, on a machine whose 2 cores are shared with other work.\n\n",
		elapsed.Round(time.Second), len(objs), soakConfigMaps, soakServices, soakDeployments, warmUp)
	b.WriteString(soakTable(samples, warmUp, duration, watchBase))
	fmt.Fprintf(&b, "\n| Figure | Value |\n|---|---|\n")
	fmt.Fprintf(&b, "| ticks | %d (%s) |\n", len(ticks), soakCounts(outcomes))
	fmt.Fprintf(&b, "| ticks by trigger | %s |\n", soakCounts(triggers))
	fmt.Fprintf(&b, "| failed ticks | %d after the first convergence; %d before it (tick timeout while creating the %d objects) |\n", len(failed), len(startup), len(objs))
	fmt.Fprintf(&b, "| drifts injected | %d (%d edits, %d deletes) |\n", len(drifts), len(drifts)-deletes, deletes)
	fmt.Fprintf(&b, "| drifts healed | %d (recond's heal latency histogram counted %.0f; fights %.0f) |\n", len(lat), healedByRecond, fights)
	fmt.Fprintf(&b, "| heal latency (injection to live object reverted, polled every 50 ms) | p50 %s, p90 %s, max %s |\n",
		soakLatency(soakPct(lat, 50)), soakLatency(soakPct(lat, 90)), soakLatency(soakPct(lat, 100)))
	fmt.Fprintf(&b, "| commits | %d, applied %d; commit to cluster p50 %s, max %s |\n", commitSeq, len(applies), soakLatency(soakPct(applies, 50)), soakLatency(soakPct(applies, 100)))
	fmt.Fprintf(&b, "| webhooks, syncs, page and probe requests | %s |\n", soakCounts(answers))
	fmt.Fprintf(&b, "| Deployment rollouts reported | %d |\n", rolledOut.Load())
	t.Logf("soak figures:\n%s", b.String())
	if dir := os.Getenv("RECOND_SOAK_DOCS"); dir != "" {
		path := filepath.Join(dir, "img", "soak.png")
		if err := plotSoak(path, samples, warmUp, watchBase); err != nil {
			t.Errorf("plot: %v", err)
		} else {
			t.Logf("wrote %s", path)
		}
	}

	// Assertions.
	if len(failed) > 0 {
		t.Errorf("%d failed ticks, want none (no failure was injected):\n%s", len(failed), strings.Join(failed, "\n"))
	}
	if len(startup) > 0 {
		t.Logf("ticks that ran out of time creating the objects, before the first convergence:\n%s", strings.Join(startup, "\n"))
	}
	if v := r.Metric("recond_ticks_total", map[string]string{"outcome": "failed"}); v != float64(len(startup)) {
		t.Errorf("recond_ticks_total{outcome=failed} = %v, want %d (the tick lines' count)", v, len(startup))
	}
	if len(notHealed) > 0 {
		t.Errorf("%d of %d drifts not healed within %s:\n%s", len(notHealed), len(drifts), soakHealTimeout, strings.Join(notHealed, "\n"))
	}
	if len(drifts) == 0 || len(applies) == 0 && commitSeq > 0 {
		t.Errorf("%d drifts, %d of %d commits applied: the run disturbed nothing", len(drifts), len(applies), commitSeq)
	}
	if len(unapplied) > 0 {
		t.Errorf("commits not applied within %s: %v", soakHealTimeout, unapplied)
	}
	for _, src := range []string{"webhook", "manual", "watch", "interval"} {
		if triggers[src] == 0 {
			t.Errorf("no tick triggered by %s; ticks by trigger: %s", src, soakCounts(triggers))
		}
	}
	for what, n := range answers {
		if f := strings.Fields(what); f[len(f)-1] != "200" && f[len(f)-1] != "202" {
			t.Errorf("%d answers %q, want 200 or 202", n, what)
		}
	}
	if len(sampleErrs) > 0 {
		t.Errorf("scrapes failed: %v", sampleErrs)
	}
	for _, p := range soakFlatness(samples, warmUp, duration) {
		if p != "" {
			t.Error(p)
		}
	}
}

// soakFlatness compares the mean of the second half of the samples with the
// first sample after warm-up, with the stated margins; it returns the
// problems found.
func soakFlatness(samples []soakSample, warmUp, duration time.Duration) []string {
	warm, half, ok := soakSplit(samples, warmUp, duration)
	if !ok {
		return []string{fmt.Sprintf("%d samples: too few for a warm sample and a second half", len(samples))}
	}
	mean := func(f func(soakSample) float64) float64 {
		s := 0.0
		for _, x := range half {
			s += f(x)
		}
		return s / float64(len(half))
	}
	var out []string
	check := func(name string, f func(soakSample) float64, limit float64, margin string) {
		if m := mean(f); m > limit {
			out = append(out, fmt.Sprintf("%s: second-half mean %.1f above %.1f (warm sample %.1f %s): a leak", name, m, limit, f(warm), margin))
		}
	}
	check("goroutines", func(s soakSample) float64 { return s.goroutines }, warm.goroutines*(1+soakGoroutineMargin), "+10%")
	// The heap goal set by the last GC, not the allocated heap: that one
	// saws between GCs (8-16 MiB in a 10-minute run), so that one sample
	// taken low would fail a flat run.
	check("heap goal", func(s soakSample) float64 { return s.nextGC }, warm.nextGC*(1+soakMemoryMargin), "+25%")
	check("RSS", func(s soakSample) float64 { return s.rss }, warm.rss*(1+soakMemoryMargin), "+25%")
	check("open fds", func(s soakSample) float64 { return s.fds }, warm.fds+soakFDMargin, "+10")
	// Watches are a count that must not move at all; a sample may catch a
	// watch that the server just ended and the informer is re-opening,
	// so the second half's most frequent value is compared, and no sample
	// may be above the warm one.
	if m := soakMode(half, func(s soakSample) float64 { return s.watches }); m != warm.watches {
		out = append(out, fmt.Sprintf("open watches: second half mostly %v, warm sample %v", m, warm.watches))
	}
	for _, s := range half {
		if s.watches > warm.watches {
			out = append(out, fmt.Sprintf("open watches: %v at %s, above the warm sample's %v", s.watches, s.at.Round(time.Second), warm.watches))
			break
		}
	}
	return out
}

// soakSplit returns the first sample at or after warm-up and the samples
// of the second half of the run.
func soakSplit(samples []soakSample, warmUp, duration time.Duration) (soakSample, []soakSample, bool) {
	if len(samples) == 0 {
		return soakSample{}, nil, false
	}
	t0 := samples[0].at
	var warm *soakSample
	var half []soakSample
	for i, s := range samples {
		if warm == nil && s.at-t0 >= warmUp {
			warm = &samples[i]
		}
		if s.at-t0 >= duration/2 {
			half = append(half, s)
		}
	}
	if warm == nil || len(half) == 0 {
		return soakSample{}, nil, false
	}
	return *warm, half, true
}

func soakMode(samples []soakSample, f func(soakSample) float64) float64 {
	n := map[float64]int{}
	best, bestN := 0.0, 0
	for _, s := range samples {
		v := f(s)
		n[v]++
		if n[v] > bestN || n[v] == bestN && v > best {
			best, bestN = v, n[v]
		}
	}
	return best
}

// soakTable is the Markdown table of the samples: start, warm, end and max
// of each, and the second half's mean against its limit.
func soakTable(samples []soakSample, warmUp, duration time.Duration, watchBase float64) string {
	if len(samples) == 0 {
		return "no samples\n"
	}
	warm, half, ok := soakSplit(samples, warmUp, duration)
	start, end := samples[0], samples[len(samples)-1]
	var b strings.Builder
	fmt.Fprintf(&b, "%d samples, one every %s; warm = first sample after %s; limit on the second half's mean.\n\n", len(samples), soakSampleEvery, warmUp)
	b.WriteString("| Metric | start | warm | end | max | second-half mean | limit |\n|---|---|---|---|---|---|---|\n")
	row := func(name string, f func(soakSample) float64, format func(float64) string, limit func(float64) float64) {
		mx, m := 0.0, 0.0
		for _, s := range samples {
			mx = max(mx, f(s))
		}
		for _, s := range half {
			m += f(s)
		}
		lim, mean := "—", "—"
		if ok {
			m /= float64(len(half))
			mean, lim = format(m), format(limit(f(warm)))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", name, format(f(start)), format(f(warm)), format(f(end)), format(mx), mean, lim)
	}
	num := func(v float64) string { return fmt.Sprintf("%.0f", v) }
	mib := func(v float64) string { return fmt.Sprintf("%.1f MiB", v/(1<<20)) }
	row("go_goroutines", func(s soakSample) float64 { return s.goroutines }, num, func(w float64) float64 { return w * (1 + soakGoroutineMargin) })
	row("go_memstats_heap_alloc_bytes", func(s soakSample) float64 { return s.heap }, mib, func(w float64) float64 { return w * (1 + soakMemoryMargin) })
	row("go_memstats_next_gc_bytes", func(s soakSample) float64 { return s.nextGC }, mib, func(w float64) float64 { return w * (1 + soakMemoryMargin) })
	row("process_resident_memory_bytes", func(s soakSample) float64 { return s.rss }, mib, func(w float64) float64 { return w * (1 + soakMemoryMargin) })
	row("process_open_fds", func(s soakSample) float64 { return s.fds }, num, func(w float64) float64 { return w + soakFDMargin })
	row("recond's open watches", func(s soakSample) float64 { return s.watches - watchBase }, num, func(w float64) float64 { return w })
	fmt.Fprintf(&b, "\nrecond's open watches: `apiserver_longrunning_requests{verb=\"WATCH\",scope=\"namespace\"}` of the test bed's API server less the %.0f open before recond started (recond exports no count of its own). The heap is asserted by go_memstats_next_gc_bytes, the heap goal set by the last GC (live heap × (1 + GOGC/100)): the allocated heap saws between GCs and is shown, not asserted.\n", watchBase)
	return b.String()
}

func soakCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func soakLatency(d time.Duration) string {
	if d <= 0 {
		return "—"
	}
	if d < time.Second {
		return fmt.Sprintf("%d ms", d.Milliseconds())
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// soakPct is the p-th percentile (nearest rank) of ds; 0 when empty.
func soakPct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func soakSend(req *http.Request) int {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// soakPush is a GitHub push to refs/heads/main signed with
// soakWebhookSecret; its body differs per delivery (a receiver drops a body
// it has seen as a replay).
func soakPush(url, delivery string) *http.Request {
	after := sha256.Sum256([]byte(delivery))
	body := fmt.Appendf(nil, `{"ref":"refs/heads/main","before":"0000000000000000000000000000000000000000","after":"%x","repository":{"full_name":"org/repo"}}`, after[:20])
	return testenv.GitHubPush(url, delivery, body, soakWebhookSecret)
}

// soakDriftObject changes o's drift field to value as another field manager,
// or deletes o.
func soakDriftObject(ctx context.Context, ns string, o *soakObject, del bool, value string) error {
	c := cp.Client
	if del {
		var err error
		switch o.kind {
		case "ConfigMap":
			err = c.CoreV1().ConfigMaps(ns).Delete(ctx, o.name, metav1.DeleteOptions{})
		case "Service":
			err = c.CoreV1().Services(ns).Delete(ctx, o.name, metav1.DeleteOptions{})
		default:
			err = c.AppsV1().Deployments(ns).Delete(ctx, o.name, metav1.DeleteOptions{})
		}
		if err != nil {
			return fmt.Errorf("delete %s/%s: %w", o.kind, o.name, err)
		}
		return nil
	}
	opts := metav1.PatchOptions{FieldManager: soakIntruder}
	var err error
	switch o.kind {
	case "ConfigMap":
		_, err = c.CoreV1().ConfigMaps(ns).Patch(ctx, o.name, types.MergePatchType, fmt.Appendf(nil, `{"data":{"k":%q}}`, value), opts)
	case "Service":
		_, err = c.CoreV1().Services(ns).Patch(ctx, o.name, types.MergePatchType, fmt.Appendf(nil, `{"spec":{"selector":{"app":%q}}}`, value), opts)
	default:
		_, err = c.AppsV1().Deployments(ns).Patch(ctx, o.name, types.StrategicMergePatchType,
			fmt.Appendf(nil, `{"spec":{"template":{"spec":{"containers":[{"name":"web","image":%q}]}}}}`, value), opts)
	}
	if err != nil {
		return fmt.Errorf("patch %s/%s: %w", o.kind, o.name, err)
	}
	return nil
}

// soakLive is the live object's UID and drift field.
func soakLive(ctx context.Context, ns string, o *soakObject) (types.UID, string, error) {
	c := cp.Client
	switch o.kind {
	case "ConfigMap":
		cm, err := c.CoreV1().ConfigMaps(ns).Get(ctx, o.name, metav1.GetOptions{})
		if err != nil {
			return "", "", err
		}
		return cm.UID, cm.Data["k"], nil
	case "Service":
		s, err := c.CoreV1().Services(ns).Get(ctx, o.name, metav1.GetOptions{})
		if err != nil {
			return "", "", err
		}
		return s.UID, s.Spec.Selector["app"], nil
	default:
		d, err := c.AppsV1().Deployments(ns).Get(ctx, o.name, metav1.GetOptions{})
		if err != nil {
			return "", "", err
		}
		img := ""
		if cs := d.Spec.Template.Spec.Containers; len(cs) > 0 {
			img = cs[0].Image
		}
		return d.UID, img, nil
	}
}

func soakLiveUID(ctx context.Context, ns string, o *soakObject) (types.UID, error) {
	uid, _, err := soakLive(ctx, ns, o)
	return uid, err
}

// soakInGit reports whether the live o is as Git has it now (drift field and,
// for a Deployment, replicas).
func soakInGit(ctx context.Context, ns string, o *soakObject) bool {
	_, v, err := soakLive(ctx, ns, o)
	if err != nil || v != o.value {
		return false
	}
	if o.kind != "Deployment" {
		return true
	}
	d, err := cp.Client.AppsV1().Deployments(ns).Get(ctx, o.name, metav1.GetOptions{})
	return err == nil && d.Spec.Replicas != nil && int(*d.Spec.Replicas) == o.replicas
}

// soakScrape reads one sample: recond's /metrics and the API server's open
// watches.
func soakScrape(ctx context.Context, r *Recond) (soakSample, error) {
	s := soakSample{at: time.Since(r.Start)}
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(r.Addr + "/metrics")
	if err != nil {
		return s, fmt.Errorf("get /metrics: %w", err)
	}
	tp := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := tp.TextToMetricFamilies(resp.Body)
	resp.Body.Close()
	if err != nil {
		return s, fmt.Errorf("parse /metrics: %w", err)
	}
	for name, dst := range map[string]*float64{
		"go_goroutines": &s.goroutines, "go_memstats_heap_alloc_bytes": &s.heap, "go_memstats_next_gc_bytes": &s.nextGC,
		"process_resident_memory_bytes": &s.rss, "process_open_fds": &s.fds, "recond_ticks_total": &s.ticks,
	} {
		v, ok := sumFamily(fams[name], nil)
		if !ok {
			return s, fmt.Errorf("recond exports no %s", name)
		}
		*dst = v
	}
	if s.watches, err = soakAPIWatches(ctx); err != nil {
		return s, err
	}
	return s, nil
}

// soakAPIWatches is the number of namespace-scoped watches open on the test
// bed's API server (recond's are the only ones in this package's run).
func soakAPIWatches(ctx context.Context) (float64, error) {
	raw, err := cp.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("get the API server's /metrics: %w", err)
	}
	tp := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := tp.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return 0, fmt.Errorf("parse the API server's /metrics: %w", err)
	}
	fam := fams["apiserver_longrunning_requests"]
	if fam == nil {
		return 0, errors.New("the API server exports no apiserver_longrunning_requests")
	}
	v, _ := sumFamily(fam, map[string]string{"verb": "WATCH", "scope": "namespace"}) // none open: 0
	return v, nil
}

// plotSoak draws the samples in four panels (goroutines, memory, open
// descriptors, open watches) against time, with the end of warm-up marked,
// into a PNG.
func plotSoak(path string, samples []soakSample, warmUp time.Duration, watchBase float64) error {
	if len(samples) == 0 {
		return errors.New("no samples")
	}
	t0 := samples[0].at
	minutes := func(s soakSample) float64 { return (s.at - t0).Minutes() }
	blue := color.RGBA{R: 31, G: 119, B: 180, A: 255}
	green := color.RGBA{R: 44, G: 160, B: 44, A: 255}
	red := color.RGBA{R: 214, G: 39, B: 40, A: 255}
	grey := color.RGBA{R: 150, G: 150, B: 150, A: 255}
	type series struct {
		name  string
		color color.Color
		f     func(soakSample) float64
	}
	panel := func(title, unit string, ss ...series) (*plot.Plot, error) {
		p := plot.New()
		p.Title.Text = title
		p.X.Label.Text = "minutes since the first convergence"
		p.Y.Label.Text = unit
		p.Add(plotter.NewGrid())
		p.Legend.Top, p.Legend.Left = false, true
		p.Y.Min = 0
		ymax := 0.0
		for _, s := range ss {
			pts := make(plotter.XYs, len(samples))
			for i, x := range samples {
				pts[i] = plotter.XY{X: minutes(x), Y: s.f(x)}
				ymax = max(ymax, s.f(x))
			}
			l, pt, err := plotter.NewLinePoints(pts)
			if err != nil {
				return nil, fmt.Errorf("plot %s: %w", s.name, err)
			}
			l.Color, l.Width = s.color, vg.Points(1.5)
			pt.Color, pt.Shape, pt.Radius = s.color, draw.CircleGlyph{}, vg.Points(1.5)
			p.Add(l, pt)
			if len(ss) > 1 {
				p.Legend.Add(s.name, l)
			}
		}
		p.Y.Max = ymax * 1.25
		if len(ss) > 1 {
			p.Legend.Top = true // above the lines: leave it room
			p.Y.Max = ymax * 1.5
		}
		if p.Y.Max == 0 {
			p.Y.Max = 1
		}
		w, err := plotter.NewLine(plotter.XYs{{X: warmUp.Minutes(), Y: 0}, {X: warmUp.Minutes(), Y: p.Y.Max}})
		if err != nil {
			return nil, err
		}
		w.Color, w.Dashes = grey, []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(w)
		if len(ss) == 1 {
			p.Legend.Add("end of warm-up", w)
		}
		return p, nil
	}
	mib := func(f func(soakSample) float64) func(soakSample) float64 {
		return func(s soakSample) float64 { return f(s) / (1 << 20) }
	}
	var ps [4]*plot.Plot
	var err error
	if ps[0], err = panel("Goroutines", "go_goroutines", series{"goroutines", blue, func(s soakSample) float64 { return s.goroutines }}); err != nil {
		return err
	}
	if ps[1], err = panel("Memory", "MiB", series{"RSS", red, mib(func(s soakSample) float64 { return s.rss })},
		series{"heap goal (next GC)", green, mib(func(s soakSample) float64 { return s.nextGC })},
		series{"heap allocated", blue, mib(func(s soakSample) float64 { return s.heap })}); err != nil {
		return err
	}
	if ps[2], err = panel("Open file descriptors", "process_open_fds", series{"fds", blue, func(s soakSample) float64 { return s.fds }}); err != nil {
		return err
	}
	if ps[3], err = panel("recond's open watches (API server's count)", "watches",
		series{"watches", blue, func(s soakSample) float64 { return s.watches - watchBase }}); err != nil {
		return err
	}
	img := vgimg.New(11*vg.Inch, 7*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: 2, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	grid := [][]*plot.Plot{{ps[0], ps[1]}, {ps[2], ps[3]}}
	canvases := plot.Align(grid, tiles, dc)
	for i := range grid {
		for j := range grid[i] {
			grid[i][j].Draw(canvases[i][j])
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// TestSoakFlatness checks the soak run's leak checks on made-up samples:
// flat series pass; a series that grows past its margin after warm-up, or a
// watch more than at warm-up, is reported. It runs without the soak.
func TestSoakFlatness(t *testing.T) {
	flat := soakSample{goroutines: 50, heap: 12 << 20, nextGC: 17 << 20, rss: 70 << 20, fds: 13, watches: 5}
	series := func(grow func(i int, s *soakSample)) []soakSample {
		out := make([]soakSample, 61) // 10 min, one every 10 s
		for i := range out {
			s := flat
			s.at = time.Duration(i) * soakSampleEvery
			if i == 0 {
				s.goroutines, s.heap, s.nextGC = 106, 8<<20, 15<<20 // the first sync's burst
			}
			if grow != nil && i > 12 {
				grow(i-12, &s)
			}
			out[i] = s
		}
		return out
	}
	cases := []struct {
		name    string
		samples []soakSample
		want    []string // prefixes of the problems reported
	}{
		{"flat", series(nil), nil},
		{"noise within the margins", series(func(i int, s *soakSample) {
			s.goroutines += float64(i % 4)
			s.heap += float64(i%3) * (4 << 20) // the allocated heap saws: not asserted
			s.nextGC += float64(i%3) * (1 << 20)
			s.fds += float64(i % 5)
		}), nil},
		{"a watch re-opened at one sample", series(func(i int, s *soakSample) {
			if i == 30 {
				s.watches--
			}
		}), nil},
		{"a goroutine per sample", series(func(i int, s *soakSample) { s.goroutines += float64(i) }), []string{"goroutines"}},
		{"heap goal grows 300 KiB per sample", series(func(i int, s *soakSample) { s.nextGC += float64(i) * (300 << 10) }), []string{"heap goal"}},
		{"RSS grows", series(func(i int, s *soakSample) { s.rss += float64(i) * (1 << 20) }), []string{"RSS"}},
		{"a descriptor every 2 samples", series(func(i int, s *soakSample) { s.fds += float64(i / 2) }), []string{"open fds"}},
		{"one more watch from minute 5", series(func(i int, s *soakSample) {
			if i >= 18 {
				s.watches++
			}
		}), []string{"open watches", "open watches"}},
		{"one more watch late", series(func(i int, s *soakSample) {
			if i >= 45 {
				s.watches++
			}
		}), []string{"open watches"}},
		{"too few samples", series(nil)[:5], []string{"5 samples"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := soakFlatness(c.samples, 2*time.Minute, 10*time.Minute)
			var prefixes []string
			for i, p := range got {
				if i < len(c.want) && strings.HasPrefix(p, c.want[i]) {
					prefixes = append(prefixes, c.want[i])
				} else {
					prefixes = append(prefixes, p)
				}
			}
			if diff := cmp.Diff(c.want, prefixes); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}
