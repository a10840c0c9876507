package cluster

import (
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"recond.dev/recond/internal/testenv"
)

var cp *testenv.ControlPlane

func TestMain(m *testing.M) { os.Exit(testenv.RunTests(m, &cp)) }

// countDiscovery counts the discovery requests (GET /api, /apis...) made
// through it.
type countDiscovery struct {
	next http.RoundTripper
	n    atomic.Int64
}

func (c *countDiscovery) RoundTrip(r *http.Request) (*http.Response, error) {
	if p := r.URL.Path; p == "/api" || p == "/apis" || strings.HasPrefix(p, "/apis/") && strings.Count(p, "/") <= 3 {
		c.n.Add(1)
	}
	return c.next.RoundTrip(r)
}

// TestKindOfALaterCRDIsFound: a kind whose CRD is installed after the
// client first filled its discovery cache is resolved once the CRD is
// there (the mapper alone never looks again), and a kind still unknown
// refreshes discovery at most once per RediscoverAfter.
func TestKindOfALaterCRDIsFound(t *testing.T) {
	cp.Require(t)
	cfg := rest.CopyConfig(cp.Config)
	counter := &countDiscovery{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter })
	c, err := New(cfg, cp.Namespace(t))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	c.now = func() time.Time { return now }
	if _, err := c.Mapping(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}); err != nil {
		t.Fatal(err)
	}
	filled := counter.n.Load()
	if _, err := c.Mapping(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}); err != nil || counter.n.Load() != filled {
		t.Fatalf("a known kind: %v, %d discovery requests, want none", err, counter.n.Load()-filled)
	}
	later := schema.GroupVersionKind{Group: "cluster.recond.dev", Version: "v1", Kind: "Sprocket"}
	if _, err := c.Mapping(later); !meta.IsNoMatchError(err) {
		t.Fatalf("before the CRD: %v, want no match", err)
	}
	refreshed := counter.n.Load()
	if refreshed == filled {
		t.Error("an unknown kind refreshed no discovery")
	}
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	testenv.InstallCRD(t, dyn, testenv.CRD(t, "sprocket"))
	// Within RediscoverAfter of the last refresh: the cache is kept.
	if _, err := c.Mapping(later); !meta.IsNoMatchError(err) || counter.n.Load() != refreshed {
		t.Fatalf("within RediscoverAfter: %v after %d requests, want no match and no request", err, counter.n.Load()-refreshed)
	}
	now = now.Add(RediscoverAfter)
	m, err := c.Mapping(later)
	if err != nil {
		t.Fatalf("after the CRD was installed: %v", err)
	}
	if m.Resource.Resource != "sprockets" || m.Scope.Name() != meta.RESTScopeNameNamespace {
		t.Errorf("mapping = %+v", m)
	}
}
