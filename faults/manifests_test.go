package faults

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/reconcile/cluster"
)

// manifestCM is a ConfigMap named name with data k: value.
func manifestCM(name, value string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  k: %s\n", name, value)
}

var (
	gvrCRD = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

// adminDynamic is a dynamic client with the admin identity: the platform
// team acting out of band.
func adminDynamic(t testing.TB) dynamic.Interface {
	t.Helper()
	d, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// liveValue is data.k of ConfigMap name in ns, "" with found false when the
// ConfigMap does not exist.
func liveValue(t testing.TB, ns, name string) (string, bool) {
	t.Helper()
	cm, err := cp.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", false
	}
	if err != nil {
		t.Fatalf("get ConfigMap %s: %v", name, err)
	}
	return cm.Data["k"], true
}

// firstRevisionIntact checks that the fault left the first revision as it
// was: keep still holds v1 (no part of the new revision applied) and
// dropped, which the new revision removes, was not pruned.
func firstRevisionIntact(t testing.TB, ns string) {
	t.Helper()
	if v, ok := liveValue(t, ns, "keep"); !ok || v != "v1" {
		t.Errorf("ConfigMap keep: k = %q (exists %v), want v1: part of the failing revision was applied", v, ok)
	}
	if _, ok := liveValue(t, ns, "dropped"); !ok {
		t.Error("ConfigMap dropped was pruned while the revision that drops it failed")
	}
}

// fixedRevisionApplied checks that the fixed revision is applied in full:
// keep holds v2 and dropped is pruned.
func fixedRevisionApplied(t testing.TB, ns string) {
	t.Helper()
	if v, _ := liveValue(t, ns, "keep"); v != "v2" {
		t.Errorf("ConfigMap keep after recovery: k = %q, want v2", v)
	}
	if _, ok := liveValue(t, ns, "dropped"); ok {
		t.Error("ConfigMap dropped was not pruned after recovery")
	}
}

// firstRevision commits keep (v1) and dropped, starts nothing.
func firstRevision() map[string]string {
	return map[string]string{"keep.yaml": manifestCM("keep", "v1"), "dropped.yaml": manifestCM("dropped", "v1")}
}

// faultyRevision changes keep to v2, drops dropped and adds extra.
func faultyRevision(extra map[string]string) map[string]string {
	files := map[string]string{"keep.yaml": manifestCM("keep", "v2"), "dropped.yaml": ""}
	for k, v := range extra {
		files[k] = v
	}
	return files
}

// manifestFaultOn waits for the fault's tick, checks that the process still
// runs, that the phase failure is counted and that nothing moved, and
// returns the tick.
func manifestFaultOn(t *testing.T, r *Recond, after uint64, phase, reason, says string) Tick {
	t.Helper()
	before := r.Metric("recond_phase_failures_total", map[string]string{"phase": phase, "reason": reason})
	// A tick cut by its timeout (a watch cache still syncing for a kind
	// the revision adds, on a loaded machine) is not the fault's: the
	// next tick meets the fault.
	tk := r.WaitTick(30*time.Second, after, func(tk Tick) bool { return tk.Failed() && tk.Reason != "timeout" })
	if tk.Phase != phase || tk.Reason != reason {
		t.Fatalf("the fault's tick: %s; want failed in %s, reason %s", tk, phase, reason)
	}
	if !strings.Contains(tk.Error, says) {
		t.Errorf("the tick's error %q does not say %q", tk.Error, says)
	}
	if tk.Num("created") != 0 || tk.Num("updated") != 0 || tk.Num("pruned") != 0 {
		t.Errorf("the failed tick wrote: created %v updated %v pruned %v", tk.Num("created"), tk.Num("updated"), tk.Num("pruned"))
	}
	// A second failing tick: the failure is steady, not a crash loop.
	tk2 := r.WaitTick(30*time.Second, tk.ID, func(tk Tick) bool { return tk.Reason != "timeout" })
	if !FailedIn(phase, reason)(tk2) {
		t.Errorf("the tick after the fault's first: %s; want failed in %s (%s) again", tk2, phase, reason)
	}
	if after := r.Metric("recond_phase_failures_total", map[string]string{"phase": phase, "reason": reason}); after < max(before, 0)+1 {
		t.Errorf("recond_phase_failures_total{phase=%q,reason=%q}: %v then %v, want it to move", phase, reason, before, after)
	}
	if r.Exited() {
		t.Fatal("recond exited on the fault")
	}
	firstRevisionIntact(t, namespaceOf(r))
	t.Logf("while the fault is on: %s", tk2)
	return tk2
}

// namespaceOf is the --namespace recond runs for.
func namespaceOf(r *Recond) string {
	args := r.cmd.Args
	for i, a := range args {
		if a == "--namespace" && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// TestFaultManifestCRDAppearsLater: a commit holds a custom resource whose
// CRD does not exist yet. The read phase fails with reason not_found (the
// kind is unknown to the server: nothing can be validated, so nothing of the
// commit is applied and nothing pruned); once a platform team creates the
// CRD, a tick applies the whole commit, the custom resource included, within
// cluster.RediscoverAfter (discovery is refreshed at most that often for a
// kind it does not know) and one more tick.
func TestFaultManifestCRDAppearsLater(t *testing.T) {
	repo := testenv.NewRepo(t)
	repo.Commit("first", firstRevision())
	n := cp.Namespace(t)
	group := n + ".faults.recond.dev"
	r := StartRecond(t, Base(t, repo.URL(), n, Kubeconfig(t))...)
	first := r.WaitTick(30*time.Second, 0, Succeeded)

	widget := fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata:\n  name: w\nspec:\n  size: 3\n", group)
	repo.Commit("a custom resource", faultyRevision(map[string]string{"widget.yaml": widget}))
	tk := manifestFaultOn(t, r, first.ID, "read", "not_found", "Widget/w")

	// The platform team installs the CRD.
	dyn := adminDynamic(t)
	ctx := context.Background()
	testenv.InstallCRD(t, dyn, testenv.CRDInGroup(t, "widget", group))
	// Discovery is refreshed for an unknown kind at most once per
	// RediscoverAfter: the bound is that many ticks of the 1 s interval,
	// plus the tick that reads the new kind.
	within := int(math.Ceil(cluster.RediscoverAfter.Seconds())) + 1
	r.Recovery("a CRD that appears later", time.Now(), tk.ID, within, 60*time.Second, Succeeded)
	gvr := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}
	if _, err := dyn.Resource(gvr).Namespace(n).Get(ctx, "w", metav1.GetOptions{}); err != nil {
		t.Errorf("the custom resource after recovery: %v", err)
	}
	fixedRevisionApplied(t, n)
}

// TestFaultManifestRejectedByValidation: a commit holds a Deployment the API
// server rejects (replicas -1). The apply phase fails with reason invalid in
// its validating dry run, before any write: the commit's other changes are
// not applied and nothing is pruned; a fixing commit recovers within two
// ticks.
func TestFaultManifestRejectedByValidation(t *testing.T) {
	repo := testenv.NewRepo(t)
	repo.Commit("first", firstRevision())
	n := cp.Namespace(t)
	r := StartRecond(t, Base(t, repo.URL(), n, Kubeconfig(t))...)
	first := r.WaitTick(30*time.Second, 0, Succeeded)

	deployment := func(replicas int) string {
		return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: %d
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: nginx:1.27}]
`, replicas)
	}
	repo.Commit("replicas -1", faultyRevision(map[string]string{"deployment.yaml": deployment(-1)}))
	tk := manifestFaultOn(t, r, first.ID, "apply", "invalid", "Deployment/web")
	if !strings.Contains(tk.Error, "nothing written") {
		t.Errorf("the error %q does not say nothing was written", tk.Error)
	}
	if _, err := cp.Client.AppsV1().Deployments(n).Get(context.Background(), "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Deployment web exists although it was rejected: %v", err)
	}

	repo.Commit("replicas 1", map[string]string{"deployment.yaml": deployment(1)})
	r.Recovery("an object rejected by validation", time.Now(), tk.ID, 2, 60*time.Second, Succeeded)
	if d, err := cp.Client.AppsV1().Deployments(n).Get(context.Background(), "web", metav1.GetOptions{}); err != nil || *d.Spec.Replicas != 1 {
		t.Errorf("Deployment web after the fix: %v", err)
	}
	fixedRevisionApplied(t, n)
}

// serviceAccountKubeconfig installs deploy/base's ServiceAccount, Role and
// RoleBinding (as shipped) in ns and returns a kubeconfig that acts as that
// ServiceAccount (the admin's credentials, impersonating it).
func serviceAccountKubeconfig(t testing.TB, ns string) string {
	t.Helper()
	ctx := context.Background()
	dyn := adminDynamic(t)
	for _, f := range []string{"serviceaccount.yaml", "role.yaml", "rolebinding.yaml"} {
		b, err := os.ReadFile(filepath.Join("..", "deploy", "base", "rbac", f))
		if err != nil {
			t.Fatal(err)
		}
		var u unstructured.Unstructured
		if err := yaml.Unmarshal(b, &u.Object); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		gvr := map[string]schema.GroupVersionResource{
			"ServiceAccount": {Version: "v1", Resource: "serviceaccounts"},
			"Role":           {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
			"RoleBinding":    {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
		}[u.GetKind()]
		if subjects, ok, _ := unstructured.NestedSlice(u.Object, "subjects"); ok {
			for _, s := range subjects {
				s.(map[string]any)["namespace"] = ns
			}
			_ = unstructured.SetNestedSlice(u.Object, subjects, "subjects")
		}
		if _, err := dyn.Resource(gvr).Namespace(ns).Create(ctx, &u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", f, err)
		}
	}
	return cp.WriteKubeConfigAs(t, "system:serviceaccount:"+ns+":recond")
}

// TestFaultManifestKindNotAllowed: recond runs as the ServiceAccount bound
// to the shipped Role, and a commit adds a kind outside the Role. A
// namespaced kind fails the observe phase with reason forbidden (its LIST
// or watch is refused) and a cluster-scoped one the read phase with reason
// invalid (refused before any request); either way nothing of the commit is
// applied and nothing pruned. Removing the object from Git recovers within
// two ticks.
func TestFaultManifestKindNotAllowed(t *testing.T) {
	cases := []struct {
		name, file, manifest, phase, reason, says string
	}{
		{"RoleBinding outside the Role", "rb.yaml", `apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: escalate
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects: [{kind: ServiceAccount, name: recond}]
`, "observe", "forbidden", "rolebindings"},
		{"ClusterRole", "cr.yaml", `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: recond-escalates
rules: [{apiGroups: ['*'], resources: ['*'], verbs: ['*']}]
`, "read", "invalid", "cluster-scoped"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			repo := testenv.NewRepo(t)
			repo.Commit("first", firstRevision())
			n := cp.Namespace(t)
			r := StartRecond(t, Base(t, repo.URL(), n, serviceAccountKubeconfig(t, n))...)
			first := r.WaitTick(30*time.Second, 0, Succeeded)
			repo.Commit("a kind recond may not touch", faultyRevision(map[string]string{tc.file: tc.manifest}))
			tk := manifestFaultOn(t, r, first.ID, tc.phase, tc.reason, tc.says)
			repo.Commit("remove it", map[string]string{tc.file: ""})
			r.Recovery(tc.name, time.Now(), tk.ID, 2, 60*time.Second, Succeeded)
			fixedRevisionApplied(t, n)
		})
	}
}
