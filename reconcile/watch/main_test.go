package watch

import (
	"context"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/reconcile/cluster"
)

// cp is the control plane the package's tests share; each test has its own
// namespace.
var cp *testenv.ControlPlane

func TestMain(m *testing.M) { os.Exit(testenv.RunTests(m, &cp)) }

const selector = "app.kubernetes.io/managed-by=recond,recond.dev/instance=recond"

var (
	gvkConfigMap  = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	gvrConfigMap  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	gvkDeployment = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	gvrDeployment = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
)

// counter counts the API requests made through a rest.Config it wraps.
type counter struct {
	mu   sync.Mutex
	reqs []string // "VERB path?query"
}

func (c *counter) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			c.mu.Lock()
			c.reqs = append(c.reqs, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
			c.mu.Unlock()
			return rt.RoundTrip(r)
		})
	})
	return cfg
}

// since returns the requests made after the first n.
func (c *counter) since(n int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.reqs[n:]...)
}

func (c *counter) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.reqs)
}

// count returns how many requests after the first n have a verb (GET,
// PATCH) and contain part.
func (c *counter) count(n int, verb, part string) int {
	k := 0
	for _, r := range c.since(n) {
		if strings.HasPrefix(r, verb+" ") && strings.Contains(r, part) {
			k++
		}
	}
	return k
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// env is one test's namespace, clients and cache.
type env struct {
	t     testing.TB
	ns    string
	dyn   dynamic.Interface // admin, uncounted
	kube  *cluster.Client
	reqs  *counter // the cache's requests
	cache *Cache
}

// newEnv makes a namespace and a Cache for it whose requests are counted.
func newEnv(t testing.TB, opts Options) *env {
	t.Helper()
	cp.Require(t)
	ns := cp.Namespace(t)
	kube, err := cluster.New(cp.Config, ns)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ns: ns, dyn: dynamic.NewForConfigOrDie(cp.Config), kube: kube, reqs: &counter{}}
	e.cache = e.newCache(e.reqs.wrap(cp.Config), opts)
	return e
}

func (e *env) newCache(cfg *rest.Config, opts Options) *Cache {
	e.t.Helper()
	c, err := New(context.Background(), dynamic.NewForConfigOrDie(cfg), e.kube, e.ns, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(c.Close)
	return c
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
