package deploy_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"recond.dev/recond/deploy"
	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/reconcile"
	"recond.dev/recond/reconcile/cluster"
	"recond.dev/recond/reconcile/source"
	"recond.dev/recond/reconcile/source/renderer"
)

// cp is the control plane the package's tests share.
var cp *testenv.ControlPlane

func TestMain(m *testing.M) { os.Exit(testenv.RunTests(m, &cp)) }

// fieldManager is what the tests install the manifests as (kubectl apply
// --server-side would be "kubectl").
const fieldManager = "recond-deploy-test"

// render builds the kustomization at dir (relative to deploy/).
func render(t testing.TB, dir string) *deploy.Rendered {
	t.Helper()
	r, err := deploy.Render(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Objects) == 0 {
		t.Fatalf("kustomize build %s: no objects", dir)
	}
	return r
}

// find returns the rendered object of kind and name, failing the test when
// there is none.
func find(t testing.TB, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s/%s among the rendered objects", kind, name)
	return nil
}

// ofKinds returns deep copies of the objects of the given kinds.
func ofKinds(objs []*unstructured.Unstructured, kinds ...string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if slices.Contains(kinds, o.GetKind()) {
			out = append(out, o.DeepCopy())
		}
	}
	return out
}

// kube is a dynamic client with a RESTMapper, for one rest.Config.
type kube struct {
	dyn    dynamic.Interface
	mapper meta.ResettableRESTMapper
}

func newKube(t testing.TB, cfg *rest.Config) *kube {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &kube{
		dyn:    dynamic.NewForConfigOrDie(cfg),
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)),
	}
}

// resource returns the client for obj's kind, in namespace ns for a
// namespaced kind whose object names none (as kubectl apply -n does).
func (k *kube) resource(obj *unstructured.Unstructured, ns string) (dynamic.ResourceInterface, error) {
	gvk := obj.GroupVersionKind()
	m, err := k.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", gvk.Kind, obj.GetName(), err)
	}
	if m.Scope.Name() != meta.RESTScopeNameNamespace {
		return k.dyn.Resource(m.Resource), nil
	}
	if obj.GetNamespace() == "" {
		if ns == "" {
			return nil, fmt.Errorf("%s/%s: namespaced, and neither it nor the test names a namespace", gvk.Kind, obj.GetName())
		}
		obj.SetNamespace(ns)
	}
	return k.dyn.Resource(m.Resource).Namespace(obj.GetNamespace()), nil
}

// apply server-side applies every object (in ns when it names none), for
// real or as a dry run (DryRun: All: validated and admitted, never stored).
func (k *kube) apply(objs []*unstructured.Unstructured, ns string, dryRun bool) error {
	opts := metav1.ApplyOptions{FieldManager: fieldManager, Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	for _, obj := range objs {
		obj = obj.DeepCopy()
		ri, err := k.resource(obj, ns)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err = ri.Apply(ctx, obj.GetName(), obj, opts)
		cancel()
		if err != nil {
			return fmt.Errorf("apply %s %s/%s (dry run %t): %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), dryRun, err)
		}
	}
	return nil
}

// ensureNamespace creates the namespace unless it exists.
func ensureNamespace(t testing.TB, name string) {
	t.Helper()
	_, err := cp.Client.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", name, err)
	}
}

// asServiceAccount is the admin config impersonating the ServiceAccount
// ns/name, as the API server sees a pod running with that account's token:
// user system:serviceaccount:<ns>:<name>, groups system:serviceaccounts,
// system:serviceaccounts:<ns> and system:authenticated. Every request it
// makes is recorded in the returned log.
func asServiceAccount(ns, name string) (*rest.Config, *requestLog) {
	cfg := rest.CopyConfig(cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + name}
	log := &requestLog{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			log.add(req.Method + " " + req.URL.Path)
			return rt.RoundTrip(req)
		})
	})
	return cfg, log
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// requestLog records "METHOD /path" of every request a client made.
type requestLog struct {
	mu   sync.Mutex
	reqs []string
}

func (l *requestLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reqs = append(l.reqs, s)
}

// since returns the requests after the first n.
func (l *requestLog) since(n int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.reqs[n:])
}

func (l *requestLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.reqs)
}

// isDiscovery reports whether a logged request only reads the API's
// discovery documents (/api, /apis, /apis/<group>/<version>).
func isDiscovery(req string) bool {
	method, path, _ := strings.Cut(req, " ")
	// The OpenAPI v3 documents tell the diff which fields are quantities,
	// int-or-strings and durations; like discovery, they are cluster-wide
	// reads every authenticated user may make.
	path, _, _ = strings.Cut(path, "?")
	return method == http.MethodGet && (path == "/api" || path == "/apis" ||
		strings.HasPrefix(path, "/api/") && strings.Count(path, "/") == 2 ||
		strings.HasPrefix(path, "/apis/") && strings.Count(path, "/") <= 3 ||
		path == "/openapi/v3" || strings.HasPrefix(path, "/openapi/v3/"))
}

var (
	gvrConfigMap  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	gvrSecret     = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	gvrService    = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	gvrDeployment = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	gvrPDB        = schema.GroupVersionResource{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"}
)

// get returns a live object (as the admin), or nil when it does not exist.
func get(t testing.TB, gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := dynamic.NewForConfigOrDie(cp.Config).Resource(gvr).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return u
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// newReconciler is recond in-process, as `recond run` wires it: the
// repository's manifests, namespace ns, instance name "recond", prune and
// self-heal on, talking to the API server with cfg.
func newReconciler(t testing.TB, cfg *rest.Config, ns string, repo *testenv.Repo) *reconcile.Reconciler {
	t.Helper()
	src, err := source.New(source.Config{Renderer: renderer.InProcess{}, URL: repo.URL(), Path: ".", CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	kc, err := cluster.New(cfg, ns)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(testWriter{t}, nil)).With("namespace", ns)
	return reconcile.New(reconcile.Config{Namespace: ns, Name: "recond", Path: ".", Prune: true, SelfHeal: true},
		src, kc, log, reconcile.LogObserver{Log: log})
}

// tick runs one tick.
func tick(rec *reconcile.Reconciler) *reconcile.Result {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return rec.Tick(ctx)
}

// mustTick runs one tick and fails the test unless it ended with want.
func mustTick(t testing.TB, rec *reconcile.Reconciler, want reconcile.Outcome) *reconcile.Result {
	t.Helper()
	r := tick(rec)
	if r.Outcome != want {
		t.Fatalf("tick outcome = %s, want %s (failure: %v, changes: %v)", r.Outcome, want, r.Failure(), r.Changes)
	}
	return r
}

// mustFail runs one tick and fails the test unless it failed in phase with
// reason.
func mustFail(t testing.TB, rec *reconcile.Reconciler, phase reconcile.Phase, reason reconcile.Reason) *reconcile.Result {
	t.Helper()
	r := tick(rec)
	f := r.Failure()
	if r.Outcome != reconcile.OutcomeFailed || f == nil || f.Phase != phase || f.Reason != reason {
		t.Fatalf("tick outcome = %s, failure %v; want a failure in phase %s with reason %s", r.Outcome, f, phase, reason)
	}
	t.Logf("tick failed as expected: %v", f)
	return r
}

// replaceOnce replaces old, which must occur in s, once.
func replaceOnce(t testing.TB, s, old, new string) string {
	t.Helper()
	if !strings.Contains(s, old) {
		t.Fatalf("%q not found in\n%s", old, s)
	}
	return strings.Replace(s, old, new, 1)
}
