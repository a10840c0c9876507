package reconcile_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"recond.dev/recond/reconcile"
	"recond.dev/recond/reconcile/source"
)

// hookOf is a chart template of a pre-install hook of kind and name.
func hookOf(kind, name, body string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: %s\nmetadata:\n  name: %s\n  annotations: {\"helm.sh/hook\": pre-install}\n%s", kind, name, body)
}

// A chart's hook replaces only an earlier run of a hook of the same
// instance: never another instance's object, a hand-made Secret, an unowned
// claim, or an object marked recond.dev/reconcile: disabled. The hook run
// fails in apply with reason invalid, every one of them is left as it was,
// and nothing of the revision is written. Without the write gate's hook
// rule all four are deleted and replaced.
func TestHooksNeverReplaceWhatIsNotTheirs(t *testing.T) {
	b := newHarness(t)
	b.cfg.Name = "b"
	b.repo.Commit("b's app", map[string]string{"shared.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared\ndata: {owner: b}\n"})
	b.mustTick(reconcile.OutcomeApplied)

	ctx := context.Background()
	for _, o := range []*unstructured.Unstructured{
		{Object: map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "handmade"}, "stringData": map[string]any{"password": "s3cret-by-hand"}}},
		{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "kept", "annotations": map[string]any{reconcile.AnnotationReconcile: "disabled"}}, "data": map[string]any{"k": "by hand"}}},
		{Object: map[string]any{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": map[string]any{"name": "data-pvc"},
			"spec": map[string]any{"accessModes": []any{"ReadWriteOnce"}, "resources": map[string]any{"requests": map[string]any{"storage": "1Gi"}}}}},
	} {
		var err error
		switch o.GetKind() {
		case "Secret":
			_, err = b.dyn.Resource(gvrSecret).Namespace(b.ns).Create(ctx, o, metav1.CreateOptions{})
		case "ConfigMap":
			_, err = b.dyn.Resource(gvrConfigMap).Namespace(b.ns).Create(ctx, o, metav1.CreateOptions{})
		default:
			_, err = b.dyn.Resource(gvrPVC).Namespace(b.ns).Create(ctx, o, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	uids := map[string]string{
		"shared": b.uid(gvrConfigMap, "shared"), "kept": b.uid(gvrConfigMap, "kept"),
		"handmade": b.uid(gvrSecret, "handmade"), "data-pvc": b.uid(gvrPVC, "data-pvc"),
	}

	a := b.instance("a")
	a.cfg.Path = "app"
	a.helm = &source.HelmOptions{Release: "a"}
	a.repo.Commit("a's chart", map[string]string{
		"app/Chart.yaml":          "apiVersion: v2\nname: app\nversion: 1.0.0\n",
		"app/templates/app.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a-app\ndata: {x: \"1\"}\n",
		"app/templates/h1.yaml":   hookOf("ConfigMap", "shared", "data: {owner: a}\n"),
		"app/templates/h2.yaml":   hookOf("Secret", "handmade", "stringData: {password: taken}\n"),
		"app/templates/h3.yaml":   hookOf("ConfigMap", "kept", "data: {k: hook}\n"),
		"app/templates/h4.yaml":   hookOf("PersistentVolumeClaim", "data-pvc", "spec:\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 1Gi}}\n"),
		"app/templates/fine.yaml": hookOf("ConfigMap", "a-fine", "data: {k: v}\n"),
	})
	r := a.tick()
	f := r.Failure()
	if f == nil || f.Phase != reconcile.PhaseApply || f.Reason != reconcile.ReasonInvalid {
		t.Fatalf("failure %v, want apply invalid", f)
	}
	for _, name := range []string{"shared", "kept", "handmade", "data-pvc"} {
		if !strings.Contains(f.Error(), "/"+name) {
			t.Errorf("failure %q does not name %s", f.Error(), name)
		}
	}
	for name, uid := range uids {
		gvr := gvrConfigMap
		switch name {
		case "handmade":
			gvr = gvrSecret
		case "data-pvc":
			gvr = gvrPVC
		}
		o := a.get(gvr, name)
		if o == nil || string(o.GetUID()) != uid || o.GetDeletionTimestamp() != nil {
			t.Errorf("%s was deleted or replaced by a's hook", name)
		}
	}
	if a.get(gvrConfigMap, "a-app") != nil {
		t.Error("the revision was written though its pre-install hooks were refused")
	}
	// recond diff (a plan) says what the hooks would replace, and refuses.
	plan := a.reconciler().Plan(ctx)
	var named int
	for _, hp := range plan.Hooks {
		if hp.Refused != "" {
			named++
		}
	}
	if named != 4 {
		t.Errorf("plan's hooks %+v: want the 4 refused named", plan.Hooks)
	}
	// So does a --dry-run tick (its tick log lists the plan), writing
	// nothing.
	dry := a.instance("a")
	dry.repo, dry.url, dry.cfg.DryRun = a.repo, a.url, true
	dr := dry.tick()
	if len(dr.Hooks) != 5 {
		t.Errorf("--dry-run's hooks %+v: want the 5 hooks", dr.Hooks)
	}
}

// countWrites wraps h's client with a counter of the requests that write
// ConfigMaps, the inventory apart.
func countWrites(h *harness, inventory, objects *atomic.Int64) {
	cfg := rest.CopyConfig(h.rest)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method != http.MethodGet && strings.Contains(req.URL.Path, "/configmaps/") && req.URL.Query().Get("dryRun") == "" {
				if strings.Contains(req.URL.Path, "/configmaps/"+reconcile.InventoryPrefix) {
					inventory.Add(1)
				} else {
					objects.Add(1)
				}
			}
			return rt.RoundTrip(req)
		})
	})
	h.rest = cfg
}

// A revision's hooks cost a bounded number of inventory writes, whatever
// their number (once per weight and step, not twice per hook: 40 hooks of
// one weight wrote the inventory 80 times and more), and a revision with
// more hooks than --helm-hook-max fails read with reason invalid before
// anything is written.
func TestHookStateWritesAreBounded(t *testing.T) {
	h := newHarness(t)
	h.cfg.Path = "app"
	h.helm = &source.HelmOptions{Release: "shop"}
	var inv, objs atomic.Int64
	countWrites(h, &inv, &objs)
	files := map[string]string{
		"app/Chart.yaml":         "apiVersion: v2\nname: app\nversion: 1.0.0\n",
		"app/templates/app.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata: {x: \"1\"}\n",
		"app/templates/hooks.yaml": `{{- range until 40 }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: hook-{{ . }}
  annotations: {"helm.sh/hook": pre-install}
{{- end }}
`,
	}
	h.repo.Commit("40 hooks", files)
	h.mustTick(reconcile.OutcomeApplied)
	if n := inv.Load(); n > 6 {
		t.Errorf("40 hooks wrote the inventory %d times, want at most 6", n)
	}
	if n := objs.Load(); n < 41 {
		t.Errorf("%d ConfigMap writes, want the 40 hooks and the app", n)
	}

	g := newHarness(t)
	g.cfg.Path = "app"
	g.cfg.HookMax = 10
	g.helm = &source.HelmOptions{Release: "shop"}
	g.repo.Commit("40 hooks", files)
	r := g.tick()
	expectFailure(t, r, reconcile.PhaseRead, reconcile.ReasonInvalid, "40 hooks", "--helm-hook-max")
	if g.get(gvrConfigMap, "hook-0") != nil || g.get(gvrConfigMap, "app") != nil {
		t.Error("a revision over the hook budget wrote something")
	}
}

// The SOPS keys Secret (--sops-keys-secret, recond-sops by default) is
// reserved like recond's own objects: a commit naming it fails read with
// reason invalid, as a hook of that name does.
func TestKeysSecretIsReserved(t *testing.T) {
	for _, tc := range []struct{ setting, name string }{{"", "recond-sops"}, {"team-keys", "team-keys"}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.cfg.KeysSecret = tc.setting
			h.repo.Commit("keys", map[string]string{"keys.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: " + tc.name + "\nstringData: {age.agekey: overwritten}\n"})
			r := h.tick()
			expectFailure(t, r, reconcile.PhaseRead, reconcile.ReasonInvalid, "Secret/"+tc.name)
			if h.get(gvrSecret, tc.name) != nil {
				t.Error("the keys Secret was written")
			}
		})
	}
}

// recond.dev/force: recreate never deletes an object that owns a claim
// through a chain of owners (a Deployment owning a ConfigMap that owns a
// claim): deleting it in the foreground would take the claim with it. The
// direct-owner check alone deleted the Deployment, the ConfigMap and the
// claim.
func TestForceRecreateNeverTakesAClaimThroughOwners(t *testing.T) {
	h := newHarness(t)
	dep := strings.Replace(deploymentYAML, "metadata:\n  name: web\n", "metadata:\n  name: web\n  annotations:\n    "+reconcile.AnnotationForce+": recreate\n", 1)
	if dep == deploymentYAML {
		t.Fatal("fixture: metadata not found")
	}
	h.repo.Commit("app", map[string]string{"deployment.yaml": dep})
	h.mustTick(reconcile.OutcomeApplied)
	web := h.get(gvrDeployment, "web")
	ctx := context.Background()
	ctrl := true
	mid := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "mid"}}}
	mid.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: web.GetUID(), Controller: &ctrl}})
	midLive, err := h.dyn.Resource(gvrConfigMap).Namespace(h.ns).Create(ctx, mid, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pvc := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": map[string]any{"name": "data"},
		"spec": map[string]any{"accessModes": []any{string(corev1.ReadWriteOnce)}, "resources": map[string]any{"requests": map[string]any{"storage": "1Gi"}}}}}
	pvc.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "mid", UID: midLive.GetUID()}})
	if _, err := h.dyn.Resource(gvrPVC).Namespace(h.ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(strings.Replace(dep, "    matchLabels:\n      app: web\n", "    matchLabels:\n      app: web\n      tier: front\n", 1),
		"      labels:\n        app: web\n", "      labels:\n        app: web\n        tier: front\n", 1)
	h.repo.Commit("new selector", map[string]string{"deployment.yaml": changed})
	r := h.tick()
	f := r.Failure()
	if f == nil || f.Reason != reconcile.ReasonImmutable || !strings.Contains(f.Error(), "PersistentVolumeClaim/data owned by ConfigMap/mid") {
		t.Fatalf("failure %v, want immutable naming the claim's chain of owners", f)
	}
	if got := h.get(gvrDeployment, "web"); got == nil || got.GetUID() != web.GetUID() {
		t.Fatal("the Deployment was deleted to be recreated, and its claim with it")
	}
}

// A suspension stops the tick that is writing: Suspend answers once the
// writes in flight returned, says how many there were, and nothing is
// written after it. Without the gate's suspension check the tick went on
// writing every object of the revision after the answer.
func TestSuspendStopsTheTickThatIsWriting(t *testing.T) {
	h := newHarness(t)
	h.cfg.ApplyConcurrency = 1
	first := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	var objs atomic.Int64
	cfg := rest.CopyConfig(h.rest)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodPatch && strings.Contains(req.URL.Path, "/configmaps/cm-") && req.URL.Query().Get("dryRun") == "" {
				objs.Add(1)
				once.Do(func() { close(first); <-release })
			}
			return rt.RoundTrip(req)
		})
	})
	h.rest = cfg
	files := map[string]string{}
	for i := range 20 {
		files[fmt.Sprintf("cm-%02d.yaml", i)] = fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%02d\ndata: {i: \"%d\"}\n", i, i)
	}
	h.repo.Commit("20 ConfigMaps", files)
	rec := h.reconciler()
	results := make(chan *reconcile.Result, 1)
	go func() { results <- h.tick() }()
	<-first
	type answer struct {
		s   *reconcile.Suspended
		err error
	}
	answers := make(chan answer, 1)
	go func() {
		s, err := rec.Suspend(context.Background(), "alice", "incident", 0)
		answers <- answer{s, err}
	}()
	// The write in flight returns only now; Suspend waits for it.
	select {
	case a := <-answers:
		t.Fatalf("Suspend answered (%v) while a write was in flight", a.err)
	default:
	}
	close(release)
	a := <-answers
	if a.err != nil {
		t.Fatal(a.err)
	}
	if a.s.WritesAfterRequest != 1 {
		t.Errorf("writes after the request = %d, want 1 (the one in flight)", a.s.WritesAfterRequest)
	}
	writtenAtAnswer := objs.Load()
	r := <-results
	if r.Suspension == nil {
		t.Errorf("the tick does not report the suspension (outcome %s, failure %v)", r.Outcome, r.Failure())
	}
	if f := r.Failure(); f != nil {
		t.Errorf("the tick failed (%v): a suspension is not a failure", f)
	}
	if got := objs.Load(); got != writtenAtAnswer || got != 1 {
		t.Errorf("%d object writes in all, %d at the answer: want 1, none after it", got, writtenAtAnswer)
	}
}
