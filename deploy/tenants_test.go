package deploy_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/reconcile"
)

func configMapYAML(name, owner string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  owner: %s\n", name, owner)
}

// Two tenants of examples/two-tenants (installed for real), each recond
// running as its own tenant's ServiceAccount against its own repository,
// both with the default instance name and both holding a ConfigMap "app":
// neither sees, overwrites or prunes the other's objects.
func TestTwoTenantsSideBySide(t *testing.T) {
	cp.Require(t)
	objs := render(t, "examples/two-tenants").Objects
	admin := newKube(t, cp.Config)
	if err := admin.apply(ofKinds(objs, "Namespace"), "", false); err != nil {
		t.Fatal(err)
	}
	if err := admin.apply(objs, "", false); err != nil {
		t.Fatal(err)
	}
	type tenant struct {
		ns       string
		repo     *testenv.Repo
		rec      *reconcile.Reconciler
		cfg      *rest.Config
		requests *requestLog
	}
	tenants := map[string]*tenant{}
	for _, ns := range []string{"tenant-a", "tenant-b"} {
		tn := &tenant{ns: ns, repo: testenv.NewRepo(t)}
		tn.repo.Commit("apps", map[string]string{
			"app.yaml":  configMapYAML("app", ns),
			"keep.yaml": configMapYAML("keep", ns),
		})
		tn.cfg, tn.requests = asServiceAccount(ns, "recond")
		tn.rec = newReconciler(t, tn.cfg, ns, tn.repo)
		tenants[ns] = tn
	}
	a, b := tenants["tenant-a"], tenants["tenant-b"]
	for _, tn := range []*tenant{a, b} {
		if r := mustTick(t, tn.rec, reconcile.OutcomeApplied); r.Counts.Created != 2 {
			t.Errorf("%s: created %d, want 2", tn.ns, r.Counts.Created)
		}
	}
	for _, tn := range []*tenant{a, b} {
		app := get(t, gvrConfigMap, tn.ns, "app")
		if app == nil {
			t.Fatalf("%s: no ConfigMap app", tn.ns)
		}
		if owner := app.Object["data"].(map[string]any)["owner"]; owner != tn.ns {
			t.Errorf("%s: ConfigMap app has owner %v: the other tenant wrote it", tn.ns, owner)
		}
	}
	appB := get(t, gvrConfigMap, b.ns, "app")

	// tenant-a's repository drops app: pruned in tenant-a only.
	a.repo.Commit("drop app", map[string]string{"app.yaml": ""})
	if r := mustTick(t, a.rec, reconcile.OutcomeApplied); r.Counts.Pruned != 1 {
		t.Errorf("tenant-a: pruned %d, want 1", r.Counts.Pruned)
	}
	if get(t, gvrConfigMap, a.ns, "app") != nil {
		t.Error("tenant-a: ConfigMap app was not pruned")
	}
	if now := get(t, gvrConfigMap, b.ns, "app"); now == nil || now.GetUID() != appB.GetUID() || now.GetResourceVersion() != appB.GetResourceVersion() {
		t.Fatal("tenant-b: ConfigMap app was deleted or changed by tenant-a's recond")
	}
	mustTick(t, b.rec, reconcile.OutcomeConverged)
	mustTick(t, a.rec, reconcile.OutcomeConverged)

	// Every request either recond made stayed in its own namespace, and
	// neither identity can reach the other namespace.
	for _, tn := range []*tenant{a, b} {
		own := 0
		for _, req := range tn.requests.since(0) {
			switch {
			case strings.Contains(req, "/namespaces/"+tn.ns+"/"):
				own++
			case !isDiscovery(req):
				t.Errorf("%s: request outside its namespace: %s", tn.ns, req)
			}
		}
		if own == 0 {
			t.Errorf("%s: no request recorded in its namespace: the request log does not work", tn.ns)
		}
	}
	for _, pair := range [][2]*tenant{{a, b}, {b, a}} {
		_, err := kubernetes.NewForConfigOrDie(pair[0].cfg).CoreV1().ConfigMaps(pair[1].ns).List(context.Background(), metav1.ListOptions{})
		if !errors.IsForbidden(err) {
			t.Errorf("%s listing %s's ConfigMaps: err = %v, want Forbidden", pair[0].ns, pair[1].ns, err)
		}
	}
}
