package reconcile_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"recond.dev/recond/reconcile"
)

// requests watches the calls made for a test's namespace (the inventory
// left out) and can slow the real writes down, or hold them.
type requests struct {
	ns         string
	writeDelay time.Duration // added to every real (not dry-run) write
	dryDelay   time.Duration // added to every dry run
	// writesPerTick and dryRunsPerTick, when set, let that many real writes
	// and dry runs through between two takes (one tick); the others wait
	// until their request's context (the tick's) is done, and count as
	// "held apply" and "held dryrun". The tick's deadline then cuts it after
	// a number of requests, not after a time that a loaded machine may
	// spend elsewhere.
	writesPerTick, dryRunsPerTick int
	mu                            sync.Mutex
	verbs                         map[string]int // get, list, dryrun, apply, delete
	events                        []writeEvent   // real writes, in the order they started and ended
}

// writeEvent is a real write starting or ending.
type writeEvent struct {
	resource, name string
	end            bool
}

// config returns cp.Config with a transport that records into q.
func (q *requests) config() *rest.Config {
	q.verbs = map[string]int{}
	cfg := rest.CopyConfig(cp.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			prefix := "/namespaces/" + q.ns + "/"
			_, rest, ok := strings.Cut(r.URL.Path, prefix)
			if !ok || strings.Contains(rest, reconcile.InventoryPrefix) {
				return rt.RoundTrip(r)
			}
			resource, name, _ := strings.Cut(rest, "/")
			verb := strings.ToLower(r.Method)
			switch {
			case r.Method == http.MethodGet && name == "":
				verb = "list"
			case r.Method == http.MethodPatch && strings.Contains(r.URL.RawQuery, "dryRun"):
				verb = "dryrun"
			case r.Method == http.MethodPatch:
				verb = "apply"
			}
			q.mu.Lock()
			held := verb == "apply" && q.writesPerTick > 0 && q.verbs[verb] >= q.writesPerTick ||
				verb == "dryrun" && q.dryRunsPerTick > 0 && q.verbs[verb] >= q.dryRunsPerTick
			if held {
				q.verbs["held "+verb]++
				q.mu.Unlock()
				<-r.Context().Done()
				return nil, r.Context().Err()
			}
			q.verbs[verb]++
			if verb == "apply" {
				q.events = append(q.events, writeEvent{resource: resource, name: name})
			}
			q.mu.Unlock()
			if verb == "dryrun" {
				time.Sleep(q.dryDelay)
			}
			if verb != "apply" {
				return rt.RoundTrip(r)
			}
			time.Sleep(q.writeDelay)
			resp, err := rt.RoundTrip(r)
			q.mu.Lock()
			q.events = append(q.events, writeEvent{resource: resource, name: name, end: true})
			q.mu.Unlock()
			return resp, err
		})
	})
	return cfg
}

// take returns the verbs counted since the last call and forgets them.
func (q *requests) take() map[string]int {
	q.mu.Lock()
	defer q.mu.Unlock()
	v := q.verbs
	q.verbs = map[string]int{}
	return v
}

// configMapFiles returns n ConfigMap files.
func configMapFiles(n int) map[string]string {
	files := make(map[string]string, n)
	for i := range n {
		files[fmt.Sprintf("cm-%04d.yaml", i)] = fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%04d\ndata:\n  k: v%d\n", i, i)
	}
	return files
}

// A first sync too big for one tick writes part of it in every tick, each
// tick continuing where the last one stopped, until all is written; no
// object costs a GET.
//
// The server lets 200 writes through per tick and holds the rest until the
// tick's deadline cuts them: every tick is cut after a number of writes, so
// a loaded machine (a tick slower in its other phases) changes nothing but
// how long it waits.
func TestFirstSyncAtScaleProgressesEveryTick(t *testing.T) {
	const n, perTick = 600, 200
	h := newHarness(t)
	h.cfg.ApplyConcurrency = 8
	q := &requests{ns: h.ns, writesPerTick: perTick}
	h.rest = q.config()
	h.repo.Commit("many", configMapFiles(n))
	const timeout = 3 * time.Second
	var ticks []string
	for i := 1; ; i++ {
		// n/perTick cut ticks and a converged one, and as many again for
		// ticks that ran out of time before their writes (validation).
		if i > 2*(n/perTick+1) {
			t.Fatalf("not converged after %d ticks: %v", i-1, ticks)
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		r := h.reconciler().Tick(ctx)
		cancel()
		verbs := q.take()
		ticks = append(ticks, fmt.Sprintf("%s created %d %v", r.Outcome, r.Counts.Created, verbs))
		if verbs["get"] != 0 {
			t.Errorf("tick %d: %d GETs of objects, want none (verbs %v)", i, verbs["get"], verbs)
		}
		if r.Outcome == reconcile.OutcomeConverged {
			break
		}
		// A tick writes, or, if its deadline came first, validates.
		if r.Counts.Created == 0 && verbs["dryrun"] == 0 {
			t.Fatalf("tick %d wrote and validated nothing (failure %v); ticks: %v", i, r.Failure(), ticks)
		}
		if r.Counts.Created > perTick {
			t.Fatalf("tick %d created %d, more than the %d writes the server let through; ticks: %v", i, r.Counts.Created, perTick, ticks)
		}
	}
	t.Logf("ticks: %v", ticks)
	if len(ticks) < 3 {
		t.Errorf("the first sync took %d ticks (the last converged): the timeout did not cut any tick, the test proves nothing", len(ticks))
	}
	l, err := cp.Client.CoreV1().ConfigMaps(h.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "recond.dev/instance=recond"})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != n {
		t.Errorf("%d ConfigMaps owned, want %d", len(l.Items), n)
	}
}

// A first sync finds an unowned object with a desired name by one
// unfiltered LIST per kind, never by GETs, and adopts it; a converged tick
// lists only what it owns.
func TestFirstSyncFindsUnownedObjectsByList(t *testing.T) {
	h := newHarness(t)
	q := &requests{ns: h.ns}
	h.rest = q.config()
	ctx := context.Background()
	for _, name := range []string{"web-config", "not-in-git"} {
		cm := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name}, "data": map[string]any{"greeting": "by hand"},
		}}
		if _, err := h.dyn.Resource(gvrConfigMap).Namespace(h.ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	h.repo.Commit("app", app())
	r := h.mustTick(reconcile.OutcomeApplied)
	want := reconcile.Counts{Desired: 3, Drifted: 3, Created: 2, Updated: 1, Managed: 3}
	if d := cmp.Diff(want, r.Counts); d != "" {
		t.Errorf("first sync counts (-want +got):\n%s", d)
	}
	verbs := q.take()
	// Three kinds, each listed by owner and then unfiltered.
	if verbs["get"] != 0 || verbs["list"] != 6 || verbs["apply"] != 3 {
		t.Errorf("first sync requests %v, want no get, 6 lists, 3 applies", verbs)
	}
	if g, _, _ := unstructured.NestedString(h.get(gvrConfigMap, "web-config").Object, "data", "greeting"); g != "hello" {
		t.Errorf("greeting %q: not adopted", g)
	}
	if h.get(gvrConfigMap, "not-in-git") == nil {
		t.Error("an object recond never owned was pruned")
	}
	h.mustTick(reconcile.OutcomeConverged)
	if verbs := q.take(); verbs["list"] != 3 || verbs["get"] != 0 || verbs["apply"] != 0 {
		t.Errorf("converged tick requests %v, want 3 lists only", verbs)
	}
}

// With concurrent writes, a wave is written only when the one before it
// has been: every ServiceAccount and Role before any ConfigMap, every
// ConfigMap before any Deployment.
func TestWavesAreWrittenInDependencyOrder(t *testing.T) {
	h := newHarness(t)
	h.cfg.ApplyConcurrency = 8
	q := &requests{ns: h.ns, writeDelay: 5 * time.Millisecond}
	h.rest = q.config()
	files := configMapFiles(20)
	files["sa.yaml"] = "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: web\n"
	files["role.yaml"] = "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: web\nrules:\n  - apiGroups: [\"\"]\n    resources: [configmaps]\n    verbs: [get]\n"
	for i := range 4 {
		name := fmt.Sprintf("web-%d", i)
		files[name+".yaml"] = strings.NewReplacer("name: web\n", "name: "+name+"\n", "app: web", "app: "+name).Replace(deploymentYAML)
	}
	h.repo.Commit("waves", files)
	if r := h.mustTick(reconcile.OutcomeApplied); r.Counts.Created != 26 {
		t.Fatalf("created %d, want 26", r.Counts.Created)
	}
	rank := map[string]int{"serviceaccounts": 0, "roles": 1, "configmaps": 3, "deployments": 6}
	pending := map[int]int{} // rank -> writes started and not ended
	done := map[int]int{}
	total := map[int]int{0: 1, 1: 1, 3: 20, 6: 4}
	overlap := false
	for _, e := range q.events {
		rk, ok := rank[e.resource]
		if !ok {
			t.Fatalf("write of %s", e.resource)
		}
		if e.end {
			pending[rk]--
			done[rk]++
			continue
		}
		for lower := range total {
			if lower < rk && done[lower] != total[lower] {
				t.Errorf("%s/%s started with %d of %d writes of rank %d done", e.resource, e.name, done[lower], total[lower], lower)
			}
		}
		pending[rk]++
		if pending[rk] > 1 {
			overlap = true
		}
	}
	if !overlap {
		t.Error("no two writes of one wave overlapped: the writes were not concurrent")
	}
	if d := cmp.Diff(total, done); d != "" {
		t.Errorf("writes by rank (-want +got):\n%s", d)
	}
}

// An object the server rejects in a later wave fails the phase before any
// object of an earlier wave is written, however many are written at once.
func TestRejectedObjectInLaterWaveFailsBeforeAnyWrite(t *testing.T) {
	h := newHarness(t)
	h.cfg.ApplyConcurrency = 8
	q := &requests{ns: h.ns}
	h.rest = q.config()
	files := configMapFiles(30)
	files["service.yaml"] = strings.Replace(serviceYAML, "port: 80", "port: 800000", 1)
	h.repo.Commit("bad service", files)
	r := h.tick()
	expectFailure(t, r, reconcile.PhaseApply, reconcile.ReasonInvalid, "Service/web")
	if verbs := q.take(); verbs["apply"] != 0 {
		t.Errorf("%d writes before the rejection failed the phase (verbs %v)", verbs["apply"], verbs)
	}
	l, err := cp.Client.CoreV1().ConfigMaps(h.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, cm := range l.Items {
		if strings.HasPrefix(cm.Name, "cm-") {
			names = append(names, cm.Name)
		}
	}
	if len(names) != 0 {
		t.Errorf("ConfigMaps written although a later wave was rejected: %v", names)
	}
}

// A first sync whose validating dry runs alone outlast a tick does not
// start over at every tick: the dry runs that passed are remembered, the
// next tick validates the rest and writes, and no object is validated twice.
//
// The server lets 100 dry runs through per tick and holds the rest until
// the tick's deadline cuts them: the dry runs outlast a tick by their
// number, not by the machine's speed.
func TestFirstSyncValidationSurvivesTheTickTimeout(t *testing.T) {
	const n, perTick = 300, 100
	h := newHarness(t)
	h.cfg.ApplyConcurrency = 4
	q := &requests{ns: h.ns, dryRunsPerTick: perTick}
	h.rest = q.config()
	h.repo.Commit("many", configMapFiles(n))
	dryRuns := 0
	var ticks []string
	for i := 1; ; i++ {
		// n/perTick validating ticks, one that writes and a converged one,
		// and as many again for ticks a loaded machine cuts in their writes.
		if i > 2*(n/perTick+2) {
			t.Fatalf("not converged after %d ticks: %v", i-1, ticks)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		r := h.reconciler().Tick(ctx)
		cancel()
		verbs := q.take()
		dryRuns += verbs["dryrun"]
		ticks = append(ticks, fmt.Sprintf("%s created %d %v", r.Outcome, r.Counts.Created, verbs))
		if r.Outcome == reconcile.OutcomeConverged {
			break
		}
	}
	t.Logf("ticks: %v", ticks)
	if len(ticks) < 3 {
		t.Errorf("converged in %d ticks: the dry runs did not outlast a tick, the test proves nothing", len(ticks))
	}
	if dryRuns > n+n/10 {
		t.Errorf("%d dry runs for %d objects: validated again and again", dryRuns, n)
	}
	l, err := cp.Client.CoreV1().ConfigMaps(h.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "recond.dev/instance=recond"})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != n {
		t.Errorf("%d ConfigMaps owned, want %d", len(l.Items), n)
	}
}
