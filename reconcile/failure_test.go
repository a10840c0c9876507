package reconcile_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"recond.dev/recond/reconcile"
)

// expectFailure checks that a tick failed in phase with reason, and that the
// error says what.
func expectFailure(t *testing.T, r *reconcile.Result, phase reconcile.Phase, reason reconcile.Reason, says ...string) {
	t.Helper()
	f := r.Failure()
	if r.Outcome != reconcile.OutcomeFailed || f == nil {
		t.Fatalf("outcome %s, want failed in %s", r.Outcome, phase)
	}
	if f.Phase != phase || f.Reason != reason {
		t.Fatalf("failed in %s (%s), want %s (%s): %v", f.Phase, f.Reason, phase, reason, f.Err)
	}
	for _, s := range says {
		if !strings.Contains(f.Error(), s) {
			t.Errorf("error %q does not say %q", f.Error(), s)
		}
	}
	if len(r.Ops) != 0 {
		t.Errorf("a failed %s phase wrote: %v", phase, r.Ops)
	}
	// Only health may run after the failed phase, and only once observe
	// succeeded: it assesses what runs, and writes nothing.
	var after []reconcile.Phase
	for i, p := range r.Phases {
		if p.Phase == phase {
			for _, q := range r.Phases[i+1:] {
				after = append(after, q.Phase)
			}
		}
	}
	observed := r.PhaseDuration(reconcile.PhaseObserve) > 0 && phase != reconcile.PhaseRead && phase != reconcile.PhaseObserve
	switch {
	case observed && (len(after) != 1 || after[0] != reconcile.PhaseHealth):
		t.Errorf("after the failed %s phase ran %v, want only health: %v", phase, after, r.Phases)
	case !observed && len(after) != 0:
		t.Errorf("phases after the failed one ran: %v", r.Phases)
	}
}

func TestInvalidManifestsFailReadAndChangeNothing(t *testing.T) {
	cases := []struct {
		name   string
		files  map[string]string
		reason reconcile.Reason
		says   []string
	}{
		{"broken yaml", map[string]string{"broken.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: [name: x\n"}, reconcile.ReasonInvalid, []string{"broken.yaml"}},
		{"other namespace", map[string]string{"other.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: elsewhere\n  namespace: kube-system\n"},
			reconcile.ReasonInvalid, []string{"other.yaml", "ConfigMap/elsewhere", `"kube-system"`}},
		{"cluster-scoped", map[string]string{"ns.yaml": "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: sneaky\n"},
			reconcile.ReasonInvalid, []string{"ns.yaml", "Namespace/sneaky", "cluster-scoped"}},
		{"duplicate", map[string]string{"dup.yaml": configMapYAML + "---\n" + configMapYAML}, reconcile.ReasonInvalid, []string{"dup.yaml", "ConfigMap/web-config", "duplicate"}},
		{"unknown kind", map[string]string{"w.yaml": "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n"}, reconcile.ReasonNotFound, []string{"w.yaml", "Widget/w"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.repo.Commit("app", app())
			h.mustTick(reconcile.OutcomeApplied)
			// The bad commit also drops the service: nothing may be pruned.
			files := map[string]string{"service.yaml": "", "configmap.yaml": strings.Replace(configMapYAML, "hello", "changed", 1)}
			for k, v := range tc.files {
				files[k] = v
			}
			h.repo.Commit("bad", files)
			r := h.tick()
			expectFailure(t, r, reconcile.PhaseRead, tc.reason, tc.says...)
			if h.get(gvrService, "web") == nil {
				t.Error("a failed read pruned the service")
			}
			if g, _, _ := unstructured.NestedString(h.get(gvrConfigMap, "web-config").Object, "data", "greeting"); g != "hello" {
				t.Errorf("a failed read applied part of the commit: greeting %q", g)
			}
			if h.get(gvrConfigMap, "elsewhere") != nil {
				t.Error("object for another namespace was applied")
			}
			// The next good commit recovers.
			for k := range tc.files {
				files[k] = ""
			}
			files["service.yaml"], files["configmap.yaml"] = serviceYAML, configMapYAML
			h.repo.Commit("fix", files)
			h.mustTick(reconcile.OutcomeConverged)
		})
	}
}

func TestUnreachableRepositoryFailsReadAndPrunesNothing(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit("app", app())
	var down atomic.Bool
	h.url = h.repo.ServeHTTP(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if down.Load() {
				// Hijack and drop the connection: the server is gone.
				hj, _ := w.(http.Hijacker)
				conn, _, _ := hj.Hijack()
				conn.Close()
				return
			}
			next.ServeHTTP(w, r)
		})
	})
	r := h.mustTick(reconcile.OutcomeApplied)
	if !r.Fetched {
		t.Error("first tick over HTTP did not fetch")
	}
	r = h.mustTick(reconcile.OutcomeConverged)
	if r.Fetched {
		t.Error("fetched although the remote ref did not move")
	}
	h.repo.Commit("drop everything but the deployment", map[string]string{"service.yaml": "", "configmap.yaml": ""})
	down.Store(true)
	r = h.tick()
	expectFailure(t, r, reconcile.PhaseRead, reconcile.ReasonUnavailable)
	if h.get(gvrService, "web") == nil || h.get(gvrConfigMap, "web-config") == nil {
		t.Error("objects pruned while the repository was unreachable")
	}
	down.Store(false)
	r = h.mustTick(reconcile.OutcomeApplied)
	if r.Counts.Pruned != 2 || !r.Fetched {
		t.Errorf("after recovery: fetched %v counts %+v", r.Fetched, r.Counts)
	}
}

func TestMissingPathFailsRead(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit("app", app())
	h.cfg.Path = "does/not/exist"
	expectFailure(t, h.tick(), reconcile.PhaseRead, reconcile.ReasonInvalid, "does/not/exist")
}

func TestForbiddenCallFailsItsPhase(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit("app", app())
	ctx := context.Background()
	// A service account that may read and write ConfigMaps and Services but
	// not Deployments.
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "recond", Namespace: h.ns},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""}, Resources: []string{"configmaps", "services"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"},
		}},
	}
	if _, err := cp.Client.RbacV1().Roles(h.ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "recond", Namespace: h.ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "recond"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "recond", Namespace: h.ns}},
	}
	if _, err := cp.Client.RbacV1().RoleBindings(h.ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sa := rest.CopyConfig(cp.Config)
	sa.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + h.ns + ":recond"}
	h.rest = sa
	r := h.tick()
	expectFailure(t, r, reconcile.PhaseObserve, reconcile.ReasonForbidden, "deployments")
	if h.get(gvrConfigMap, "web-config") != nil {
		t.Error("a tick that failed observe applied objects")
	}
}

func TestEmptyDesiredStateIsRefusedUnlessAllowed(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit("app", app())
	h.mustTick(reconcile.OutcomeApplied)
	h.repo.Commit("empty", map[string]string{"service.yaml": "", "configmap.yaml": "", "deployment.yaml": "", "README.md": "nothing here\n"})
	r := h.tick()
	expectFailure(t, r, reconcile.PhaseDiff, reconcile.ReasonInvalid, "--allow-empty")
	if h.get(gvrDeployment, "web") == nil {
		t.Fatal("empty desired state pruned")
	}
	h.cfg.AllowEmpty = true
	h.rec = nil
	r = h.mustTick(reconcile.OutcomeApplied)
	if r.Counts.Pruned != 3 || h.get(gvrDeployment, "web") != nil {
		t.Errorf("with --allow-empty: counts %+v", r.Counts)
	}
}

func TestSelfHealOffReportsDriftUntilNewRevision(t *testing.T) {
	h := newHarness(t)
	h.cfg.SelfHeal = false
	h.repo.Commit("app", app())
	h.mustTick(reconcile.OutcomeApplied)
	scale := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: h.ns}, Spec: autoscalingv1.ScaleSpec{Replicas: 7}}
	if _, err := cp.Client.AppsV1().Deployments(h.ns).UpdateScale(context.Background(), "web", scale, metav1.UpdateOptions{FieldManager: "kubectl"}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		r := h.mustTick(reconcile.OutcomeOutOfSync)
		if r.Counts.Drifted != 1 || len(r.Ops) != 0 {
			t.Errorf("counts %+v ops %v", r.Counts, r.Ops)
		}
	}
	// A restarted process still knows the revision was applied.
	h.rec = nil
	h.mustTick(reconcile.OutcomeOutOfSync)
	if n, _, _ := unstructured.NestedInt64(h.get(gvrDeployment, "web").Object, "spec", "replicas"); n != 7 {
		t.Fatalf("replicas %d: drift was healed with self-heal off", n)
	}
	// A new revision applies everything that differs, the drift included.
	h.repo.Commit("config", map[string]string{"configmap.yaml": strings.Replace(configMapYAML, "hello", "hi", 1)})
	r := h.mustTick(reconcile.OutcomeApplied)
	if r.Counts.Updated != 2 {
		t.Errorf("counts %+v", r.Counts)
	}
	if n, _, _ := unstructured.NestedInt64(h.get(gvrDeployment, "web").Object, "spec", "replicas"); n != 2 {
		t.Errorf("replicas %d after a new revision, want 2", n)
	}
}

func TestDryRunWritesNothing(t *testing.T) {
	h := newHarness(t)
	h.cfg.DryRun = true
	h.repo.Commit("app", app())
	r := h.mustTick(reconcile.OutcomeOutOfSync)
	if r.Counts.Drifted != 3 || r.Counts.Created != 0 || len(r.Ops) != 0 {
		t.Errorf("counts %+v ops %v", r.Counts, r.Ops)
	}
	list, err := cp.Client.CoreV1().ConfigMaps(h.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range list.Items {
		if cm.Name != "kube-root-ca.crt" {
			t.Errorf("dry run wrote ConfigMap %s", cm.Name)
		}
	}
	if h.get(gvrDeployment, "web") != nil || h.get(gvrService, "web") != nil {
		t.Error("dry run created objects")
	}
}

// An object the server rejects fails the apply phase before anything is
// written, and nothing is pruned.
func TestRejectedObjectFailsApplyBeforeAnyWrite(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit("app", app())
	h.mustTick(reconcile.OutcomeApplied)
	h.repo.Commit("bad port", map[string]string{
		"configmap.yaml":  strings.Replace(configMapYAML, "hello", "changed", 1),
		"service.yaml":    strings.Replace(serviceYAML, "port: 80", "port: 800000", 1),
		"deployment.yaml": "",
	})
	r := h.tick()
	expectFailure(t, r, reconcile.PhaseApply, reconcile.ReasonInvalid, "Service/web")
	if g, _, _ := unstructured.NestedString(h.get(gvrConfigMap, "web-config").Object, "data", "greeting"); g != "hello" {
		t.Errorf("greeting %q: written although the apply failed validation", g)
	}
	if h.get(gvrDeployment, "web") == nil {
		t.Error("pruned although the apply failed")
	}
}

// Stopping the loop (SIGTERM) during the apply phase finishes the object
// being written and writes nothing after it; nothing is pruned.
func TestStopFinishesTheCurrentObjectOnly(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit("app", app())
	h.mustTick(reconcile.OutcomeApplied)
	h.repo.Commit("change all", map[string]string{
		"configmap.yaml":  strings.Replace(configMapYAML, "hello", "stop", 1),
		"service.yaml":    strings.Replace(serviceYAML, "targetPort: 8080", "targetPort: 9090", 1),
		"deployment.yaml": strings.Replace(deploymentYAML, "nginx:1.27", "nginx:1.29", 1),
	})
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	h.rest, h.rec = stopOnFirstWrite(stop), nil
	r := h.reconciler().Tick(ctx)
	if r.Outcome != reconcile.OutcomeFailed || r.Failure().Phase != reconcile.PhaseApply {
		t.Fatalf("outcome %s, failure %v; want the apply phase stopped", r.Outcome, r.Failure())
	}
	if len(r.Ops) != 1 || r.Ops[0].Kind != "ConfigMap" || r.Ops[0].Err != nil {
		t.Fatalf("writes %v, want exactly the ConfigMap, completed", r.Ops)
	}
	if g, _, _ := unstructured.NestedString(h.get(gvrConfigMap, "web-config").Object, "data", "greeting"); g != "stop" {
		t.Errorf("the object being written when the stop came was not finished: greeting %q", g)
	}
	img, _, _ := unstructured.NestedSlice(h.get(gvrDeployment, "web").Object, "spec", "template", "spec", "containers")
	if img[0].(map[string]any)["image"] != "nginx:1.27" {
		t.Errorf("an object after the stop was written: %v", img[0])
	}
	// The next tick (a new process) finishes the job.
	h.rest, h.rec = cp.Config, nil
	if r := h.mustTick(reconcile.OutcomeApplied); r.Counts.Updated != 2 {
		t.Errorf("after the stop: counts %+v", r.Counts)
	}
}

// A tick stopped after its first write still records the kinds it was
// writing, so that a later commit that drops those kinds entirely prunes
// what it wrote, even in a new process.
func TestStoppedFirstSyncStillPrunesLater(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit("app", app())
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	h.rest = stopOnFirstWrite(stop)
	if r := h.reconciler().Tick(ctx); len(r.Ops) != 1 || r.Ops[0].Kind != "ConfigMap" {
		t.Fatalf("stopped first sync wrote %v, want the ConfigMap only", r.Ops)
	}
	h.repo.Commit("only the deployment", map[string]string{"configmap.yaml": "", "service.yaml": ""})
	h.rest, h.rec = cp.Config, nil
	r := h.mustTick(reconcile.OutcomeApplied)
	if r.Counts.Pruned != 1 || h.get(gvrConfigMap, "web-config") != nil {
		t.Errorf("the ConfigMap written by the stopped tick was not pruned: counts %+v", r.Counts)
	}
}

// stopOnFirstWrite returns a config whose first real (not dry-run) write of
// an object calls stop while the request is on the wire.
func stopOnFirstWrite(stop func()) *rest.Config {
	cfg := rest.CopyConfig(cp.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodPatch && !strings.Contains(r.URL.RawQuery, "dryRun") &&
				!strings.Contains(r.URL.Path, "recond-inventory") {
				stop()
			}
			return rt.RoundTrip(r)
		})
	})
	return cfg
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
