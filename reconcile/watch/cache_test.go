package watch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"recond.dev/recond/reconcile/diff"
)

var ownerLabels = map[string]any{"app.kubernetes.io/managed-by": "recond", "recond.dev/instance": "recond"}

// applyConfigMap server-side applies a ConfigMap as manager; owned gives it
// recond's labels.
func (e *env) applyConfigMap(manager, name string, owned bool, data map[string]any) {
	e.t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name},
		"data":     data,
	}}
	if owned {
		u.SetLabels(map[string]string{"app.kubernetes.io/managed-by": "recond", "recond.dev/instance": "recond"})
	}
	_, err := e.dyn.Resource(gvrConfigMap).Namespace(e.ns).Apply(context.Background(), name, u,
		metav1.ApplyOptions{FieldManager: manager, Force: true})
	if err != nil {
		e.t.Fatal(err)
	}
}

// patch merge-patches an object as manager (kubectl edit, a controller).
func (e *env) patch(gvr schema.GroupVersionResource, name, manager, body string, sub ...string) {
	e.t.Helper()
	_, err := e.dyn.Resource(gvr).Namespace(e.ns).Patch(context.Background(), name, types.MergePatchType,
		[]byte(body), metav1.PatchOptions{FieldManager: manager}, sub...)
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) delete(gvr schema.GroupVersionResource, name string) {
	e.t.Helper()
	if err := e.dyn.Resource(gvr).Namespace(e.ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// listed is what a LIST returns, as the cache keeps it: apiVersion and
// kind set, transformed, sorted by name.
func (e *env) listed(gvk schema.GroupVersionKind, gvr schema.GroupVersionResource) []unstructured.Unstructured {
	e.t.Helper()
	l, err := e.dyn.Resource(gvr).Namespace(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		e.t.Fatal(err)
	}
	out := l.Items
	for i := range out {
		out[i].SetGroupVersionKind(gvk)
		if _, err := transform("recond")(&out[i]); err != nil {
			e.t.Fatal(err)
		}
	}
	slices.SortFunc(out, func(a, b unstructured.Unstructured) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out
}

// waitListEqual waits until the cache's List equals a LIST.
func (e *env) waitListEqual(gvk schema.GroupVersionKind, gvr schema.GroupVersionResource) []unstructured.Unstructured {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second) // a guard against a hang
	for {
		got, err := e.cache.List(ctxT(e.t, 10*time.Second), gvk, selector)
		if err != nil {
			e.t.Fatal(err)
		}
		want := e.listed(gvk, gvr)
		d := cmp.Diff(want, got)
		if d == "" {
			return got
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("List differs from LIST (-LIST +List):\n%s", d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func names(items []unstructured.Unstructured) []string {
	var out []string
	for _, u := range items {
		out = append(out, u.GetName())
	}
	return out
}

func TestListMatchesLIST(t *testing.T) {
	e := newEnv(t, Options{})
	e.applyConfigMap("recond", "a", true, map[string]any{"k": "1"})
	e.applyConfigMap("recond", "b", true, map[string]any{"k": "1"})
	e.applyConfigMap("recond", "c", true, map[string]any{"k": "1"})
	e.applyConfigMap("recond", "unowned", false, map[string]any{"k": "1"})
	got := e.waitListEqual(gvkConfigMap, gvrConfigMap)
	if d := cmp.Diff([]string{"a", "b", "c"}, names(got)); d != "" {
		t.Errorf("names (-want +got):\n%s", d)
	}
	for _, u := range got {
		if u.GetAPIVersion() != "v1" || u.GetKind() != "ConfigMap" {
			t.Errorf("%s: apiVersion/kind = %s/%s, want v1/ConfigMap", u.GetName(), u.GetAPIVersion(), u.GetKind())
		}
	}

	// Another manager's update, with a last-applied annotation the cache
	// drops, a delete and a new object.
	e.patch(gvrConfigMap, "a", "kubectl", `{"metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{}","keep":"x"}},"data":{"k":"2"}}`)
	e.delete(gvrConfigMap, "b")
	e.applyConfigMap("recond", "d", true, map[string]any{"k": "1"})
	got = e.waitListEqual(gvkConfigMap, gvrConfigMap)
	if d := cmp.Diff([]string{"a", "c", "d"}, names(got)); d != "" {
		t.Errorf("names after changes (-want +got):\n%s", d)
	}

	// The cached "a" lost kubectl's field set and the annotation, and kept
	// recond's Apply entry whole.
	raw, err := e.dyn.Resource(gvrConfigMap).Namespace(e.ns).Get(context.Background(), "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a := got[0]
	if _, ok := a.GetAnnotations()[lastApplied]; ok {
		t.Errorf("cached object kept %s", lastApplied)
	}
	if a.GetAnnotations()["keep"] != "x" {
		t.Errorf("cached object lost annotation keep: %v", a.GetAnnotations())
	}
	var rawRecond metav1.ManagedFieldsEntry
	for _, m := range raw.GetManagedFields() {
		if m.Manager == "recond" {
			rawRecond = m
		}
		if m.Manager == "kubectl" && m.FieldsV1 == nil {
			t.Fatalf("the server's kubectl entry has no fields: nothing to drop")
		}
	}
	// (Read as the diff reads it: recond's field set is kept as JSON text.)
	for _, m := range diff.ManagedFields(&a) {
		switch m.Manager {
		case "recond":
			if d := cmp.Diff(rawRecond, m); d != "" {
				t.Errorf("recond's entry changed in the cache (-server +cache):\n%s", d)
			}
		default:
			if m.FieldsV1 != nil {
				t.Errorf("entry of %s kept its fields: %s", m.Manager, m.FieldsV1.Raw)
			}
		}
	}
}

func TestSecondListMakesNoRequest(t *testing.T) {
	e := newEnv(t, Options{})
	e.applyConfigMap("recond", "a", true, map[string]any{"k": "1"})
	if _, err := e.cache.List(ctxT(t, 10*time.Second), gvkConfigMap, selector); err != nil {
		t.Fatal(err)
	}
	first := e.reqs.since(0)
	if len(first) == 0 {
		t.Fatalf("first List made no request: requests are not counted")
	}
	n := e.reqs.len()
	for range 10 {
		if _, err := e.cache.List(ctxT(t, 10*time.Second), gvkConfigMap, selector); err != nil {
			t.Fatal(err)
		}
	}
	// Asked without a version: the same informer, in the preferred one.
	items, err := e.cache.List(ctxT(t, 10*time.Second), schema.GroupVersionKind{Kind: "ConfigMap"}, selector)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 1 || items[0].GetAPIVersion() != "v1" {
		t.Errorf("List without version = %v, want one v1 object", names(items))
	}
	if u, err := e.cache.Get(ctxT(t, 10*time.Second), gvkConfigMap, "a"); err != nil || u == nil {
		t.Fatalf("Get a = %v, %v", u, err)
	}
	// Give a stray request time to show.
	time.Sleep(100 * time.Millisecond)
	var other []string
	for _, r := range e.reqs.since(n) {
		if !strings.Contains(r, "watch=true") { // the informer's own re-watches
			other = append(other, r)
		}
	}
	if len(other) != 0 {
		t.Errorf("List and Get from a synced cache made requests: %v", other)
	}
	s := e.cache.Stats()
	if s.Gets != 0 || s.SyncWaits != 1 || len(s.Kinds) != 1 || s.Kinds[0].Objects != 1 || !s.Kinds[0].Synced || s.Kinds[0].Lists != 1 {
		t.Errorf("Stats = %+v, want 0 gets, 1 sync wait, one synced kind with 1 object and 1 list", s)
	}
	if s.SyncWait <= 0 {
		t.Errorf("SyncWait = %v, want > 0", s.SyncWait)
	}
	if age := s.Age(); age <= 0 || age > time.Minute {
		t.Errorf("Age = %v, want since the first sync", age)
	}
}

func TestGetMissCostsOneGET(t *testing.T) {
	e := newEnv(t, Options{})
	e.applyConfigMap("recond", "owned", true, map[string]any{"k": "1"})
	e.applyConfigMap("recond", "unowned", false, map[string]any{"k": "1"})
	gvkHPA2 := schema.GroupVersionKind{Group: "autoscaling", Version: "v2", Kind: "HorizontalPodAutoscaler"}
	gvkHPA1 := schema.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "HorizontalPodAutoscaler"}
	hpa := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
		"metadata": map[string]any{"name": "h", "labels": ownerLabels},
		"spec": map[string]any{"maxReplicas": int64(3),
			"scaleTargetRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}},
	}}
	gvrHPA := schema.GroupVersionResource{Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers"}
	if _, err := e.dyn.Resource(gvrHPA).Namespace(e.ns).Create(context.Background(), hpa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 20*time.Second)
	for _, k := range []schema.GroupVersionKind{gvkConfigMap, gvkHPA2} {
		if _, err := e.cache.List(ctx, k, selector); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name   string
		gvk    schema.GroupVersionKind
		obj    string
		found  bool
		gets   int // API GETs, by the counted transport and by Stats
		apiVer string
	}{
		{"owned, from the store", gvkConfigMap, "owned", true, 0, "v1"},
		{"unowned: a store miss is not absence", gvkConfigMap, "unowned", true, 1, "v1"},
		{"absent", gvkConfigMap, "nope", false, 1, ""},
		{"owned, in the listed version", gvkHPA2, "h", true, 0, "autoscaling/v2"},
		{"owned, in another version", gvkHPA1, "h", true, 1, "autoscaling/v1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, before := e.reqs.len(), e.cache.Stats().Gets
			u, err := e.cache.Get(ctx, tt.gvk, tt.obj)
			if err != nil {
				t.Fatal(err)
			}
			if (u != nil) != tt.found {
				t.Fatalf("Get %s found = %v, want %v", tt.obj, u != nil, tt.found)
			}
			if u != nil && u.GetAPIVersion() != tt.apiVer {
				t.Errorf("apiVersion = %s, want %s", u.GetAPIVersion(), tt.apiVer)
			}
			gets := e.reqs.count(n, "GET", "/"+tt.obj)
			counted := int(e.cache.Stats().Gets - before)
			if gets != tt.gets || counted != tt.gets {
				t.Errorf("GETs made = %d, counted = %d, want %d (%v)", gets, counted, tt.gets, e.reqs.since(n))
			}
		})
	}
}

func TestUnknownKind(t *testing.T) {
	e := newEnv(t, Options{})
	gvk := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Nothing"}
	ctx := ctxT(t, 20*time.Second)
	_, listErr := e.cache.List(ctx, gvk, selector)
	_, getErr := e.cache.Get(ctx, gvk, "x")
	_, kubeErr := e.kube.List(ctx, gvk, selector)
	for name, err := range map[string]error{"List": listErr, "Get": getErr, "cluster.Client.List": kubeErr} {
		var noKind *meta.NoKindMatchError
		if !errors.As(err, &noKind) {
			t.Errorf("%s error = %v, want a *meta.NoKindMatchError", name, err)
		}
	}
	if len(e.cache.Stats().Kinds) != 0 {
		t.Errorf("an informer was started for an unserved kind")
	}
}

func TestForbiddenList(t *testing.T) {
	e := newEnv(t, Options{})
	cfg := rest.CopyConfig(cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: fmt.Sprintf("system:serviceaccount:%s:nobody", e.ns)}
	c := e.newCache(cfg, Options{})
	start := time.Now()
	ctx := ctxT(t, 2*time.Minute)
	_, err := c.List(ctx, gvkConfigMap, selector)
	took := time.Since(start)
	if !apierrors.IsForbidden(err) {
		t.Fatalf("List error = %v, want Forbidden", err)
	}
	// It failed on its own, not when its context ended (a minute and
	// more: no busy machine reaches it).
	if ctx.Err() != nil {
		t.Errorf("List failed only when its context ended (%v, after %v), want at the refusal", ctx.Err(), took)
	}
	t.Logf("List failed after %v", took.Round(time.Millisecond))
	// The failed informer is not kept retrying in the background.
	if k := c.Stats().Kinds; len(k) != 0 {
		t.Errorf("informers after a forbidden list = %+v, want none", k)
	}
}

func TestEvents(t *testing.T) {
	var ev events
	e := newEnv(t, Options{OnEvent: ev.add})
	e.applyConfigMap("recond", "a", true, map[string]any{"k": "1"})
	dep := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "labels": ownerLabels},
		"spec": map[string]any{
			"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"app": "web"}},
				"spec":     map[string]any{"containers": []any{map[string]any{"name": "c", "image": "nginx"}}},
			},
		},
	}}
	if _, err := e.dyn.Resource(gvrDeployment).Namespace(e.ns).Apply(context.Background(), "web", dep,
		metav1.ApplyOptions{FieldManager: "recond", Force: true}); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 30*time.Second)
	for _, k := range []schema.GroupVersionKind{gvkConfigMap, gvkDeployment} {
		if _, err := e.cache.List(ctx, k, selector); err != nil {
			t.Fatal(err)
		}
	}

	// Each step is made, then waited for in the cache, before the next.
	steps := []struct {
		name string
		do   func()
		want []Event
	}{
		// A new field changes recond's field set: recond's own. (A write of
		// an owned field within the second of recond's previous write leaves
		// managedFields as they were and is reported; see classifyUpdate.)
		{"recond's own apply", func() { e.applyConfigMap("recond", "a", true, map[string]any{"k": "1", "k2": "1"}) }, nil},
		{"kubectl's merge patch", func() { e.patch(gvrConfigMap, "a", "kubectl", `{"data":{"k":"3"}}`) },
			[]Event{{Kind: "ConfigMap", Name: "a", Type: EventUpdate, Manager: "kubectl"}}},
		{"recond's forced apply heals kubectl's field", func() { e.applyConfigMap("recond", "a", true, map[string]any{"k": "1", "k2": "1"}) }, nil},
		{"an add after sync", func() { e.applyConfigMap("recond", "b", true, map[string]any{"k": "1"}) }, nil},
		{"a controller's status write", func() {
			e.patch(gvrDeployment, "web", "kube-controller-manager", `{"status":{"observedGeneration":1,"replicas":0}}`, "status")
		}, []Event{{Kind: "Deployment", Name: "web", Type: EventUpdate, Manager: "kube-controller-manager", Subresource: "status"}}},
		{"a delete", func() { e.delete(gvrConfigMap, "b") },
			[]Event{{Kind: "ConfigMap", Name: "b", Type: EventDelete}}},
	}
	for _, s := range steps {
		before := len(ev.list())
		start := time.Now()
		s.do()
		e.waitListEqual(gvkConfigMap, gvrConfigMap)
		e.waitListEqual(gvkDeployment, gvrDeployment)
		// An event follows the store update: give it time to arrive (a
		// guard against a hang, left as soon as it is there), and an
		// unwanted one time to show.
		deadline := time.Now().Add(30 * time.Second)
		for len(ev.list())-before < len(s.want) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond)
		got := ev.list()[before:]
		if d := cmp.Diff(s.want, got, ignoreAt, cmpopts.EquateEmpty()); d != "" {
			t.Errorf("%s: events (-want +got):\n%s", s.name, d)
		}
		for _, g := range got {
			if g.At.Before(start) || g.At.After(time.Now()) {
				t.Errorf("%s: event At = %v, want between the write (%v) and now", s.name, g.At, start)
			}
		}
	}
}

// TestExpiredWatchRelists: a watch that the server refuses with 410
// Expired (its resourceVersion compacted away) must make the reflector
// relist, not re-watch from the same version, and the cache must end up
// equal to a LIST, changes made meanwhile included. (A test server compacts
// etcd every few minutes only, and without compaction it still serves a
// watch from resourceVersion 1; so the refusal is the server's status,
// returned where the request would have gone.)
func TestExpiredWatchRelists(t *testing.T) {
	var mu sync.Mutex
	armed := false
	opts := Options{WatchTimeout: time.Second, expireWatch: func() error {
		mu.Lock()
		defer mu.Unlock()
		if !armed {
			return nil
		}
		armed = false
		return apierrors.NewResourceExpired("too old resource version: 1 (241)")
	}}
	e := newEnv(t, opts)
	for _, n := range []string{"a", "b", "c"} {
		e.applyConfigMap("recond", n, true, map[string]any{"k": "1"})
	}
	e.waitListEqual(gvkConfigMap, gvrConfigMap)
	lists := e.cache.Stats().Kinds[0].Lists
	n := e.reqs.len()
	mu.Lock()
	armed = true
	mu.Unlock()
	e.delete(gvrConfigMap, "b")
	e.patch(gvrConfigMap, "c", "kubectl", `{"data":{"k":"2"}}`)
	deadline := time.Now().Add(15 * time.Second)
	for e.cache.Stats().Kinds[0].Lists == lists && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if got := e.cache.Stats().Kinds[0].Lists; got != lists+1 {
		t.Fatalf("lists after 410 Expired = %d, want %d (requests: %v)", got, lists+1, e.reqs.since(n))
	}
	relisted := slices.ContainsFunc(e.reqs.since(n), func(r string) bool {
		return strings.Contains(r, "sendInitialEvents=true") || !strings.Contains(r, "watch=true")
	})
	if !relisted {
		t.Errorf("no list request after 410 Expired: %v", e.reqs.since(n))
	}
	got := e.waitListEqual(gvkConfigMap, gvrConfigMap)
	if d := cmp.Diff([]string{"a", "c"}, names(got)); d != "" {
		t.Errorf("names (-want +got):\n%s", d)
	}
}

// TestPeriodicRelist: with a short relist period the informer relists by
// itself (the watch stream ends with a 410 Expired status event, as the
// server's does for a compacted version), and stays equal to a LIST.
func TestPeriodicRelist(t *testing.T) {
	e := newEnv(t, Options{RelistPeriod: 300 * time.Millisecond})
	e.applyConfigMap("recond", "a", true, map[string]any{"k": "1"})
	e.waitListEqual(gvkConfigMap, gvrConfigMap)
	deadline := time.Now().Add(20 * time.Second)
	for e.cache.Stats().Kinds[0].Lists < 3 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if got := e.cache.Stats().Kinds[0].Lists; got < 3 {
		t.Fatalf("lists = %d after 20s with a 300ms relist period, want >= 3", got)
	}
	e.applyConfigMap("recond", "b", true, map[string]any{"k": "1"})
	e.waitListEqual(gvkConfigMap, gvrConfigMap)
}
