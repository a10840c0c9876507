package deploy_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"recond.dev/recond/events"
	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/leader"
	"recond.dev/recond/reconcile"
)

const secretYAML = `apiVersion: v1
kind: Secret
metadata:
  name: web-credentials
stringData:
  password: s3cret
`

// exampleApp is examples/demo-app (ConfigMap, Service, Deployment), the app
// the default Role is made for, plus a Secret (also in the default set).
func exampleApp(t testing.TB) map[string]string {
	t.Helper()
	files := map[string]string{"secret.yaml": secretYAML}
	paths, err := filepath.Glob("../examples/demo-app/*.yaml")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no examples/demo-app: %v", err)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(p)] = string(b)
	}
	return files
}

// recond with exactly the ServiceAccount, Role and RoleBinding of deploy/base
// (applied for real) reconciles its namespace — creates, updates, prunes,
// keeps its inventory — and can do nothing else: not another namespace, not
// a cluster-scoped object, not a kind outside its Role.
func TestLeastPrivilege(t *testing.T) {
	cp.Require(t)
	ns, other := cp.Namespace(t), cp.Namespace(t)
	admin := newKube(t, cp.Config)
	if err := admin.apply(ofKinds(render(t, "base").Objects, "ServiceAccount", "Role", "RoleBinding"), ns, false); err != nil {
		t.Fatal(err)
	}
	waitAuthorized(t, ns, "recond")
	cfg, requests := asServiceAccount(ns, "recond")
	repo := testenv.NewRepo(t)
	repo.Commit("the example app", exampleApp(t))
	rec := newReconciler(t, cfg, ns, repo)

	// The example app is created, then stays converged.
	if r := mustTick(t, rec, reconcile.OutcomeApplied); r.Counts.Created != 4 {
		t.Errorf("created %d objects, want 4", r.Counts.Created)
	}
	mustTick(t, rec, reconcile.OutcomeConverged)
	for _, o := range []struct {
		gvr  schema.GroupVersionResource
		name string
	}{
		{gvrConfigMap, "web-config"}, {gvrService, "web"}, {gvrDeployment, "web"}, {gvrSecret, "web-credentials"},
		{gvrConfigMap, "recond-inventory-recond"},
	} {
		u := get(t, o.gvr, ns, o.name)
		if u == nil {
			t.Fatalf("%s/%s was not created", o.gvr.Resource, o.name)
		}
		if o.name != "recond-inventory-recond" && u.GetLabels()[reconcile.LabelManagedBy] != reconcile.ManagedByValue {
			t.Errorf("%s/%s is not labelled as recond's", o.gvr.Resource, o.name)
		}
	}

	// An update and a prune in one commit.
	deployment := exampleApp(t)["deployment.yaml"]
	repo.Commit("scale, remove the service", map[string]string{
		"deployment.yaml": replaceOnce(t, deployment, "replicas: 2", "replicas: 3"),
		"service.yaml":    "",
	})
	r := mustTick(t, rec, reconcile.OutcomeApplied)
	if r.Counts.Updated != 1 || r.Counts.Pruned != 1 {
		t.Errorf("updated %d, pruned %d; want 1 and 1", r.Counts.Updated, r.Counts.Pruned)
	}
	if get(t, gvrService, ns, "web") != nil {
		t.Error("Service web was not pruned")
	}
	mustTick(t, rec, reconcile.OutcomeConverged)

	// Objects recond must not touch are refused while reading Git, before
	// any request about them reaches the API server (discovery aside, and
	// recond's read of its own inventory, which every tick compares with
	// its copy in memory whatever the commit holds).
	for name, manifest := range map[string]string{
		"another namespace":     "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: elsewhere\n  namespace: " + other + "\ndata:\n  k: v\n",
		"a cluster-scoped kind": "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: recond-escalates\nrules:\n  - apiGroups: ['*']\n    resources: ['*']\n    verbs: ['*']\n",
	} {
		repo.Commit(name, map[string]string{"refused.yaml": manifest})
		if requests.len() == 0 {
			t.Fatal("no request recorded: the request log does not work")
		}
		n := requests.len()
		mustFail(t, rec, reconcile.PhaseRead, reconcile.ReasonInvalid)
		for _, req := range requests.since(n) {
			if !isDiscovery(req) && req != "GET /api/v1/namespaces/"+ns+"/configmaps/recond-inventory-recond" {
				t.Errorf("%s: request %s after the read phase refused the commit", name, req)
			}
		}
		repo.Commit("revert", map[string]string{"refused.yaml": ""})
		mustTick(t, rec, reconcile.OutcomeConverged)
	}
	if get(t, gvrConfigMap, other, "elsewhere") != nil {
		t.Errorf("ConfigMap elsewhere was created in namespace %s", other)
	}

	// A kind outside the Role fails the observe phase (its LIST is
	// forbidden) and writes nothing ...
	repo.Commit("a PodDisruptionBudget", map[string]string{"pdb.yaml": pdbYAML})
	mustFail(t, rec, reconcile.PhaseObserve, reconcile.ReasonForbidden)
	if get(t, gvrPDB, ns, "web") != nil {
		t.Fatal("PodDisruptionBudget web exists although recond may not create it")
	}
	// ... until the Role is widened, as examples/more-kinds does
	// (docs/deploy.md, "Widening RBAC").
	if err := admin.apply(ofKinds(render(t, "examples/more-kinds").Objects, "Role"), ns, false); err != nil {
		t.Fatal(err)
	}
	if r := mustTick(t, rec, reconcile.OutcomeApplied); r.Counts.Created != 1 || get(t, gvrPDB, ns, "web") == nil {
		t.Errorf("after widening the Role: created %d, want the PodDisruptionBudget", r.Counts.Created)
	}

	// Directly, with recond's identity: nothing outside its namespace,
	// nothing cluster-scoped, nothing beyond its Role in its namespace.
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	if _, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("listing ConfigMaps in its own namespace: %v (the impersonation does not work?)", err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe"}}
	forbidden := func(what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: err = %v, want Forbidden", what, err)
		}
	}
	_, err := cs.CoreV1().ConfigMaps(other).List(ctx, metav1.ListOptions{})
	forbidden("list ConfigMaps in another namespace", err)
	_, err = cs.CoreV1().ConfigMaps(other).Create(ctx, cm, metav1.CreateOptions{})
	forbidden("create a ConfigMap in another namespace", err)
	_, err = cs.CoreV1().Secrets(other).Get(ctx, "any", metav1.GetOptions{})
	forbidden("get a Secret in another namespace", err)
	_, err = cs.AppsV1().Deployments(other).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "probe"}}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	forbidden("create a Deployment in another namespace", err)
	_, err = cs.CoreV1().ConfigMaps(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	forbidden("list ConfigMaps in all namespaces", err)
	_, err = cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	forbidden("list Namespaces", err)
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns + "-x"}}, metav1.CreateOptions{})
	forbidden("create a Namespace", err)
	_, err = cs.RbacV1().ClusterRoles().List(ctx, metav1.ListOptions{})
	forbidden("list ClusterRoles", err)
	_, err = cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ns + "-x"}}, metav1.CreateOptions{})
	forbidden("create a ClusterRole", err)
	_, err = cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	forbidden("create a Role in its namespace", err)
	_, err = cs.RbacV1().RoleBindings(ns).List(ctx, metav1.ListOptions{})
	forbidden("list RoleBindings in its namespace", err)
	_, err = cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	forbidden("list Pods in its namespace", err)
	_, err = cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	forbidden("create a ServiceAccount in its namespace", err)
	_, err = cs.CoreV1().ConfigMaps(ns).Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web-config"}}, metav1.UpdateOptions{})
	forbidden("update (PUT) a ConfigMap: recond only patches", err)
	_, err = cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	forbidden("watch Pods", err)
	_, err = cs.CoreV1().ConfigMaps(other).Watch(ctx, metav1.ListOptions{})
	forbidden("watch ConfigMaps in another namespace", err)
}

const pdbYAML = `apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: web
spec:
  minAvailable: 1
  selector:
    matchLabels:
      app: web
`

// The shipped Role lets recond campaign for its own Lease
// (recond-leader-recond: create, get, renew, release, and list and watch it
// by name, which the Elector's watch does) and nothing else on Leases: not
// another instance's, not a list or a watch of all, not a delete.
func TestLeaseRBACIsItsOwnLeaseOnly(t *testing.T) {
	ns, cs := shippedServiceAccount(t)

	// recond's own leader election, as the ServiceAccount: it leads, and
	// releases the Lease when stopped.
	ctx, cancel := context.WithCancel(context.Background())
	led := make(chan struct{})
	done := make(chan error, 1)
	refused := make(chan error, 100)
	go func() {
		done <- leader.Run(ctx, leader.Config{Namespace: ns, Lease: reconcile.LeaseName("recond"), Identity: "recond-0",
			LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond,
			Failed: func(err error) {
				select {
				case refused <- err:
				default:
				}
			}},
			cs.CoordinationV1(), nil, nil, func(ctx context.Context) { close(led); <-ctx.Done() })
	}()
	select {
	case <-led:
	case err := <-done:
		t.Fatalf("leader election as the ServiceAccount: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the ServiceAccount never acquired its Lease")
	}
	time.Sleep(time.Second) // renewals (update) and the Lease's watch succeed too
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("leader election ended with %v", err)
	}
	close(refused)
	for err := range refused {
		t.Errorf("a request of the election refused under the shipped Role: %v", err)
	}
	lease, err := cp.Client.CoordinationV1().Leases(ns).Get(context.Background(), "recond-leader-recond", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "" {
		t.Errorf("lease still held by %q after a clean stop", *lease.Spec.HolderIdentity)
	}

	// Another instance's Lease is out of reach.
	other := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "recond-leader-other"}}
	if _, err := cp.Client.CoordinationV1().Leases(ns).Create(context.Background(), other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bg := context.Background()
	forbidden := func(what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: err = %v, want Forbidden", what, err)
		}
	}
	_, err = cs.CoordinationV1().Leases(ns).Get(bg, "recond-leader-other", metav1.GetOptions{})
	forbidden("get another instance's Lease", err)
	_, err = cs.CoordinationV1().Leases(ns).Update(bg, other, metav1.UpdateOptions{})
	forbidden("update another instance's Lease", err)
	_, err = cs.CoordinationV1().Leases(ns).List(bg, metav1.ListOptions{})
	forbidden("list Leases", err)
	_, err = cs.CoordinationV1().Leases(ns).List(bg, metav1.ListOptions{FieldSelector: "metadata.name=recond-leader-other"})
	forbidden("list another instance's Lease by name", err)
	w, err := cs.CoordinationV1().Leases(ns).Watch(bg, metav1.ListOptions{})
	if err == nil {
		w.Stop()
	}
	forbidden("watch Leases", err)
	if _, err := cs.CoordinationV1().Leases(ns).List(bg, metav1.ListOptions{FieldSelector: "metadata.name=recond-leader-recond"}); err != nil {
		t.Errorf("list its own Lease by name: %v", err)
	}
	if w, err := cs.CoordinationV1().Leases(ns).Watch(bg, metav1.ListOptions{FieldSelector: "metadata.name=recond-leader-recond"}); err != nil {
		t.Errorf("watch its own Lease by name: %v", err)
	} else {
		w.Stop()
	}
	err = cs.CoordinationV1().Leases(ns).Delete(bg, "recond-leader-recond", metav1.DeleteOptions{})
	forbidden("delete its own Lease", err)
	_, err = cs.CoordinationV1().Leases(ns+"-elsewhere").Create(bg, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "recond-leader-recond"}}, metav1.CreateOptions{})
	forbidden("create a Lease in another namespace", err)
}

// The shipped Role lets recond send its Events (create, and patch for a
// repeated Event's series), through the same broadcaster recond uses, and
// nothing else on Events: no read, list or delete, no core-group Events, no
// other namespace.
func TestEventsRBACIsCreateAndPatchOnly(t *testing.T) {
	ns, cs := shippedServiceAccount(t)
	bg := context.Background()
	inv, err := cp.Client.CoreV1().ConfigMaps(ns).Create(bg, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "recond-inventory-recond"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	o, err := events.New(cs.EventsV1(), events.Options{Namespace: ns, Instance: "recond"})
	if err != nil {
		t.Fatal(err)
	}
	invRef := reconcile.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Name: inv.Name, UID: inv.UID}
	failed := func() *reconcile.Result {
		return &reconcile.Result{Revision: "abc", Inventory: invRef, Phases: []reconcile.PhaseResult{{Phase: reconcile.PhaseRead,
			Err: &reconcile.PhaseError{Phase: reconcile.PhaseRead, Reason: reconcile.ReasonUnavailable, Err: errors.New("down")}}}}
	}
	ok := &reconcile.Result{Revision: "abc", Inventory: invRef, Phases: []reconcile.PhaseResult{{Phase: reconcile.PhaseRead}}}
	// TickFailed, Recovered, TickFailed again: the second TickFailed is the
	// same Event, which the broadcaster counts in a series with a PATCH.
	o.TickEnd(bg, failed())
	time.Sleep(200 * time.Millisecond)
	o.TickEnd(bg, ok)
	o.TickEnd(bg, failed())
	deadline := time.Now().Add(15 * time.Second)
	for {
		l, err := cp.Client.EventsV1().Events(ns).List(bg, metav1.ListOptions{FieldSelector: "reason=TickFailed"})
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Items) == 1 && l.Items[0].Series != nil && l.Items[0].Series.Count == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("TickFailed Events as the ServiceAccount: %+v, want one with a series of 2 (create, then patch)", l.Items)
		}
		time.Sleep(100 * time.Millisecond)
	}
	sctx, cancel := context.WithTimeout(bg, 5*time.Second)
	defer cancel()
	if err := o.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}

	forbidden := func(what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: err = %v, want Forbidden", what, err)
		}
	}
	_, err = cs.EventsV1().Events(ns).List(bg, metav1.ListOptions{})
	forbidden("list Events", err)
	l, err := cp.Client.EventsV1().Events(ns).List(bg, metav1.ListOptions{})
	if err != nil || len(l.Items) == 0 {
		t.Fatalf("no Event to try reading: %v", err)
	}
	_, err = cs.EventsV1().Events(ns).Get(bg, l.Items[0].Name, metav1.GetOptions{})
	forbidden("get an Event", err)
	err = cs.EventsV1().Events(ns).Delete(bg, l.Items[0].Name, metav1.DeleteOptions{})
	forbidden("delete an Event", err)
	ev := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "x"}, EventTime: metav1.NowMicro(), Reason: "X", Action: "X",
		Type: "Normal", ReportingController: events.ReportingController, ReportingInstance: "x",
		Regarding: corev1.ObjectReference{Kind: "ConfigMap", Name: inv.Name, Namespace: ns}}
	ev.Namespace = ns + "-elsewhere"
	_, err = cs.EventsV1().Events(ev.Namespace).Create(bg, ev, metav1.CreateOptions{})
	forbidden("create an Event in another namespace", err)
	_, err = cs.CoreV1().Events(ns).Create(bg, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "y", Namespace: ns},
		InvolvedObject: corev1.ObjectReference{Kind: "ConfigMap", Name: inv.Name, Namespace: ns}, Reason: "X"}, metav1.CreateOptions{})
	forbidden("create a core-group Event", err)
}

// shippedServiceAccount applies deploy/base's ServiceAccount, Role and
// RoleBinding in a namespace of its own and returns it, with a client that
// acts as that ServiceAccount.
func shippedServiceAccount(t *testing.T) (string, kubernetes.Interface) {
	t.Helper()
	cp.Require(t)
	ns := cp.Namespace(t)
	admin := newKube(t, cp.Config)
	if err := admin.apply(ofKinds(render(t, "base").Objects, "ServiceAccount", "Role", "RoleBinding"), ns, false); err != nil {
		t.Fatal(err)
	}
	waitAuthorized(t, ns, "recond")
	cfg, _ := asServiceAccount(ns, "recond")
	return ns, kubernetes.NewForConfigOrDie(cfg)
}

// waitAuthorized waits until the API server's authorizer, which learns of
// a new Role and RoleBinding from its own caches, lets the ServiceAccount
// get its Lease: a request made before that is refused although the Role
// allows it.
func waitAuthorized(t *testing.T, ns, sa string) {
	t.Helper()
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: "system:serviceaccount:" + ns + ":" + sa,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "get", Group: "coordination.k8s.io",
			Resource: "leases", Name: reconcile.LeaseName("recond")},
	}}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) { // hang guard
		r, err := cp.Client.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), review, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.Allowed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Role never took effect for %s: %s", review.Spec.User, r.Status.Reason)
		}
	}
}
