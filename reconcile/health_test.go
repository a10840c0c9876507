package reconcile_test

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/reconcile"
	"recond.dev/recond/reconcile/health"
)

const (
	healthConfigMapYAML = `apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  a: "1"
`
	gadgetYAML = `apiVersion: health.recond.dev/v1
kind: Gadget
metadata:
  name: g
spec:
  size: 3
`
)

var gvrGadget = schema.GroupVersionResource{Group: "health.recond.dev", Version: "v1", Resource: "gadgets"}

// objectHealth returns the health the tick found for kind/name.
func objectHealth(t *testing.T, r *reconcile.Result, kind, name string) reconcile.ObjectHealth {
	t.Helper()
	if r.Health == nil {
		t.Fatalf("the tick assessed no health (phases %+v, failure %v)", r.Phases, r.Failure())
	}
	for _, o := range r.Health.Objects {
		if o.Ref.Kind == kind && o.Ref.Name == name {
			return o
		}
	}
	t.Fatalf("no health for %s/%s in %+v", kind, name, r.Health.Objects)
	return reconcile.ObjectHealth{}
}

// wantHealth checks one object's health and the instance's.
func wantHealth(t *testing.T, step string, r *reconcile.Result, kind, name string, obj health.Status, inst health.Instance) reconcile.ObjectHealth {
	t.Helper()
	o := objectHealth(t, r, kind, name)
	if o.Status != obj || r.Health.Status != inst {
		t.Fatalf("%s: %s/%s is %s (%s), instance %s; want %s, instance %s", step, kind, name, o.Status, o.Message, r.Health.Status, obj, inst)
	}
	return o
}

// writeStatus plays the controller: it replaces the status of a live object
// through the status subresource.
func (h *harness) writeStatus(gvr schema.GroupVersionResource, name string, status func(live *unstructured.Unstructured) map[string]any) {
	h.t.Helper()
	ctx := context.Background()
	live, err := h.dyn.Resource(gvr).Namespace(h.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	live.Object["status"] = status(live)
	if _, err := h.dyn.Resource(gvr).Namespace(h.ns).UpdateStatus(ctx, live, metav1.UpdateOptions{FieldManager: "test-controller"}); err != nil {
		h.t.Fatalf("write status of %s: %v", name, err)
	}
}

// rollOut plays the Deployment controller (testenv.RollOut).
func (h *harness) rollOut(progress string) {
	h.t.Helper()
	if err := testenv.RollOut(context.Background(), cp.Client, h.ns, "web", progress); err != nil {
		h.t.Fatal(err)
	}
}

// TestDeploymentHealth follows a Deployment recond applied through its
// controller's status: in progress until the status says the rollout is
// done, failed at ProgressDeadlineExceeded, current again once fixed. The
// tick outcome stays about Git against the API server: converged throughout.
func TestDeploymentHealth(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit("web", map[string]string{"web.yaml": testenv.DeploymentYAML, "settings.yaml": healthConfigMapYAML})

	r := h.mustTick(reconcile.OutcomeApplied)
	wantHealth(t, "applied", r, "Deployment", "web", health.InProgress, health.Progressing)
	wantHealth(t, "applied", r, "ConfigMap", "settings", health.Current, health.Progressing)
	if r.Health.Counts[health.InProgress] != 1 || r.Health.Counts[health.Current] != 1 || len(r.Health.Objects) != 2 {
		t.Fatalf("counts %v over %d objects, want 1 in progress and 1 current", r.Health.Counts, len(r.Health.Objects))
	}
	if d := r.PhaseDuration(reconcile.PhaseHealth); d <= 0 {
		t.Fatalf("the health phase did not run: %+v", r.Phases)
	}

	h.rollOut(testenv.RolledOut)
	r = h.mustTick(reconcile.OutcomeConverged)
	wantHealth(t, "rolled out", r, "Deployment", "web", health.Current, health.Healthy)

	h.rollOut(testenv.DeadlineExceeded)
	r = h.mustTick(reconcile.OutcomeConverged)
	o := wantHealth(t, "deadline exceeded", r, "Deployment", "web", health.Failed, health.Degraded)
	if !strings.Contains(strings.ToLower(o.Message), "deadline") {
		t.Errorf("failed Deployment's message %q does not say why", o.Message)
	}
	if bad := r.Health.Unhealthy(); len(bad) != 1 || bad[0].Ref.Name != "web" {
		t.Errorf("unhealthy = %+v, want only Deployment/web", bad)
	}

	h.rollOut(testenv.RolledOut)
	r = h.mustTick(reconcile.OutcomeConverged)
	wantHealth(t, "fixed", r, "Deployment", "web", health.Current, health.Healthy)
}

// TestProgressDeadline: an object that stays in progress longer than the
// health timeout after recond applied it is failed; a new write of it starts
// the clock again.
func TestProgressDeadline(t *testing.T) {
	h := newHarness(t)
	// Far above the time from the write to the health phase of the same
	// tick, which a loaded machine stretches: the tick that writes sees
	// the object in progress whatever the machine.
	h.cfg.HealthTimeout = 3 * time.Second
	h.repo.Commit("web", map[string]string{"web.yaml": testenv.DeploymentYAML})

	r := h.mustTick(reconcile.OutcomeApplied)
	wantHealth(t, "applied", r, "Deployment", "web", health.InProgress, health.Progressing)
	// The write was before the tick returned: past the timeout from now
	// is past it from the write (a sleep never ends early).
	time.Sleep(h.cfg.HealthTimeout + 500*time.Millisecond)
	r = h.mustTick(reconcile.OutcomeConverged)
	o := wantHealth(t, "past the timeout", r, "Deployment", "web", health.Failed, health.Degraded)
	if !strings.Contains(o.Message, "progress deadline") || !strings.Contains(o.Message, "applied at revision") {
		t.Errorf("message %q does not name the progress deadline and the revision", o.Message)
	}

	// A new process (a restart, a new leader) does not start the clock
	// again: it runs from recond's last apply, as the object records it.
	h.rec = nil
	r = h.mustTick(reconcile.OutcomeConverged)
	o = wantHealth(t, "after a restart", r, "Deployment", "web", health.Failed, health.Degraded)
	if !strings.Contains(o.Message, "applied at revision "+r.Revision[:12]) {
		t.Errorf("after a restart: message %q does not name the revision applied", o.Message)
	}

	h.repo.Commit("web 2", map[string]string{"web.yaml": strings.Replace(testenv.DeploymentYAML, "nginx:1.27", "nginx:1.28", 1)})
	r = h.mustTick(reconcile.OutcomeApplied)
	wantHealth(t, "written again", r, "Deployment", "web", health.InProgress, health.Progressing)
}

// TestCustomResourceHealth: a custom resource without status is unknown (not
// healthy); a --health-rules rule reading status.phase decides it once the
// controller writes a phase.
func TestCustomResourceHealth(t *testing.T) {
	h := newHarness(t)
	testenv.InstallCRD(t, h.dyn, testenv.CRD(t, "gadget"))
	h.repo.Commit("gadget", map[string]string{"gadget.yaml": gadgetYAML, "settings.yaml": healthConfigMapYAML})

	r := h.mustTick(reconcile.OutcomeApplied)
	wantHealth(t, "no status", r, "Gadget", "g", health.Unknown, health.InstanceUnknown)

	rules, err := health.ParseRules([]byte(`rules:
- apiVersion: health.recond.dev/v1
  kind: Gadget
  current: 'status.phase == "Ready"'
  failed: 'status.phase == "Failed"'
`))
	if err != nil {
		t.Fatal(err)
	}
	h.cfg.HealthRules, h.rec = rules, nil
	r = h.mustTick(reconcile.OutcomeConverged)
	wantHealth(t, "rule, no status", r, "Gadget", "g", health.Unknown, health.InstanceUnknown)

	phase := func(p string) func(*unstructured.Unstructured) map[string]any {
		return func(*unstructured.Unstructured) map[string]any { return map[string]any{"phase": p} }
	}
	for _, step := range []struct {
		phase string
		obj   health.Status
		inst  health.Instance
	}{
		{"Pending", health.InProgress, health.Progressing},
		{"Ready", health.Current, health.Healthy},
		{"Failed", health.Failed, health.Degraded},
	} {
		h.writeStatus(gvrGadget, "g", phase(step.phase))
		r = h.mustTick(reconcile.OutcomeConverged)
		wantHealth(t, "phase "+step.phase, r, "Gadget", "g", step.obj, step.inst)
	}
}

// TestHealthWhenATickFails: health is assessed when a later phase fails
// (the workloads still run), not when read fails (nothing to assess).
func TestHealthWhenATickFails(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit("settings", map[string]string{"settings.yaml": healthConfigMapYAML})
	h.mustTick(reconcile.OutcomeApplied)

	// The server rejects the new object: apply fails, nothing is written,
	// and the health of what runs is still known. The Service Git names
	// does not exist: missing, and the instance not healthy.
	h.repo.Commit("bad", map[string]string{"settings.yaml": healthConfigMapYAML,
		"bad.yaml": "apiVersion: v1\nkind: Service\nmetadata:\n  name: bad\nspec:\n  ports:\n  - port: 99999\n"})
	r := h.mustTick(reconcile.OutcomeFailed)
	if f := r.Failure(); f.Phase != reconcile.PhaseApply {
		t.Fatalf("failed in %s, want apply: %v", f.Phase, f)
	}
	wantHealth(t, "apply failed", r, "ConfigMap", "settings", health.Current, health.Degraded)
	wantHealth(t, "apply failed", r, "Service", "bad", health.Missing, health.Degraded)
	if len(r.Health.Objects) != 2 || r.Health.Counts[health.Missing] != 1 {
		t.Errorf("assessed %+v (counts %v), want the ConfigMap and the missing Service", r.Health.Objects, r.Health.Counts)
	}
	if len(r.Rejected) != 1 || r.Rejected[0].Name != "bad" || r.Rejected[0].Err == nil {
		t.Errorf("rejected = %+v, want Service/bad with its error", r.Rejected)
	}

	h.repo.Commit("unreadable", map[string]string{"settings.yaml": "a: [\n"})
	r = h.mustTick(reconcile.OutcomeFailed)
	if r.Health != nil {
		t.Errorf("a tick whose read failed assessed health: %+v", r.Health)
	}
}

// TestStatusChangeAsksForATick: with a watch cache, a controller's status
// write asks for a tick, so health is as fresh as drift (the interval here is
// an hour); it is not drift, so nothing is written or counted as healed.
func TestStatusChangeAsksForATick(t *testing.T) {
	w := newWatched(t, map[string]string{"web.yaml": testenv.DeploymentYAML})
	first := w.ticks()[0]
	wantHealth(t, "applied", first, "Deployment", "web", health.InProgress, health.Progressing)

	w.rollOut(testenv.RolledOut)
	rs := w.waitFor(t, "a tick that sees the status", func(rs []*reconcile.Result) bool {
		last := rs[len(rs)-1]
		return last.Health != nil && last.Health.Status == health.Healthy
	})
	last := rs[len(rs)-1]
	if last.Trigger != reconcile.TriggerWatch || len(last.Ops) != 0 || len(last.Heals) != 0 || last.Outcome != reconcile.OutcomeConverged {
		t.Errorf("the status tick: trigger %s, ops %v, heals %v, outcome %s; want a converged watch tick that wrote nothing",
			last.Trigger, last.Ops, last.Heals, last.Outcome)
	}
}
