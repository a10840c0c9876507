package reconcile_test

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/reconcile"
	"recond.dev/recond/reconcile/cluster"
	"recond.dev/recond/reconcile/source"
	"recond.dev/recond/reconcile/source/renderer"
)

// cp is the control plane the package's tests share; each test has its own
// namespace.
var cp *testenv.ControlPlane

func TestMain(m *testing.M) { os.Exit(testenv.RunTests(m, &cp)) }

// harness is one test's namespace, repository and reconciler settings.
type harness struct {
	t    testing.TB
	ns   string
	repo *testenv.Repo
	url  string // what --repo says; defaults to the repository's file:// URL
	cfg  reconcile.Config
	rest *rest.Config
	dyn  dynamic.Interface
	rec  *reconcile.Reconciler
	// observers replace the default log observer when set.
	observers []reconcile.Observer
	// helm, when set, renders a chart at the path with the instance's
	// seed and the API server's capabilities, as the binary does.
	helm *source.HelmOptions
	// wrap, when set, wraps the source the reconciler reads.
	wrap func(reconcile.Source) reconcile.Source
	// sopsKeys is the source's --sops-age-keys-file.
	sopsKeys string
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	cp.Require(t)
	ns := cp.Namespace(t)
	repo := testenv.NewRepo(t)
	return &harness{
		t: t, ns: ns, repo: repo, url: repo.URL(), rest: cp.Config,
		cfg: reconcile.Config{Namespace: ns, Name: "recond", Path: ".", Prune: true, SelfHeal: true},
		dyn: dynamic.NewForConfigOrDie(cp.Config),
	}
}

// reconciler builds (once) the reconciler from the harness settings.
func (h *harness) reconciler() *reconcile.Reconciler {
	h.t.Helper()
	if h.rec != nil {
		return h.rec
	}
	kube, err := cluster.New(h.rest, h.ns)
	if err != nil {
		h.t.Fatal(err)
	}
	scfg := source.Config{Renderer: renderer.InProcess{}, URL: h.url, Path: h.cfg.Path, CacheDir: h.t.TempDir(), SOPSAgeKeysFile: h.sopsKeys}
	if h.helm != nil {
		seed := reconcile.SeedPrefix + h.cfg.Name
		scfg.Helm = source.Helm{HelmOptions: *h.helm, Namespace: h.ns, Capabilities: kube.Capabilities,
			Seed: func(ctx context.Context) ([]byte, error) { return kube.Seed(ctx, seed, true) }}
	}
	src, err := source.New(scfg)
	if err != nil {
		h.t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(testWriter{h.t}, nil))
	if _, bench := h.t.(*testing.B); bench {
		log = slog.New(slog.DiscardHandler)
	}
	observers := h.observers
	if observers == nil {
		observers = []reconcile.Observer{reconcile.LogObserver{Log: log}}
	}
	var rs reconcile.Source = src
	if h.wrap != nil {
		rs = h.wrap(src)
	}
	h.rec = reconcile.New(h.cfg, rs, kube, log, observers...)
	return h.rec
}

// tick runs one tick and returns its result.
func (h *harness) tick() *reconcile.Result {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return h.reconciler().Tick(ctx)
}

// mustTick runs one tick and fails the test unless it ended with want.
func (h *harness) mustTick(want reconcile.Outcome) *reconcile.Result {
	h.t.Helper()
	r := h.tick()
	if r.Outcome != want {
		h.t.Fatalf("tick outcome = %s, want %s (failure: %v, changes: %v)", r.Outcome, want, r.Failure(), r.Changes)
	}
	return r
}

var (
	gvrConfigMap  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	gvrService    = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	gvrSecret     = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	gvrDeployment = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
)

// get returns a live object, or nil when it does not exist.
func (h *harness) get(gvr schema.GroupVersionResource, name string) *unstructured.Unstructured {
	h.t.Helper()
	u, err := h.dyn.Resource(gvr).Namespace(h.ns).Get(context.Background(), name, metaGet)
	if err != nil {
		if isNotFound(err) {
			return nil
		}
		h.t.Fatal(err)
	}
	return u
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p[:len(p)-1]))
	return len(p), nil
}
