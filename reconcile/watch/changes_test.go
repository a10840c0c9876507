package watch

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Changes names each object changed after a generation once, oldest
// first, and cannot tell (ok false) across an informer's start or beyond
// what the journal remembers.
func TestChangesJournal(t *testing.T) {
	cm := schema.GroupKind{Kind: "ConfigMap"}
	obj := func(name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetName(name)
		return u
	}
	c := &Cache{}
	c.bump(cm, nil)      // 1: an informer starts
	c.bump(cm, obj("a")) // 2
	c.bump(cm, obj("b")) // 3
	c.bump(cm, obj("a")) // 4
	for _, tc := range []struct {
		since uint64
		want  []Changed
		ok    bool
	}{
		{since: 0, ok: false},
		{since: 1, want: []Changed{{Kind: "ConfigMap", Name: "a"}, {Kind: "ConfigMap", Name: "b"}}, ok: true},
		{since: 3, want: []Changed{{Kind: "ConfigMap", Name: "a"}}, ok: true},
		{since: 4, ok: true},
	} {
		got, ok := c.Changes(tc.since)
		if ok != tc.ok || !cmp.Equal(got, tc.want) {
			t.Errorf("Changes(%d) = %v, %t; want %v, %t", tc.since, got, ok, tc.want, tc.ok)
		}
	}
	for range journalSize {
		c.bump(cm, obj("x"))
	}
	if _, ok := c.Changes(4); ok {
		t.Error("Changes told the changes since a generation it no longer remembers")
	}
	gen := c.gen.Load()
	if got, ok := c.Changes(gen - 1); !ok || len(got) != 1 {
		t.Errorf("Changes of the last generation = %v, %t; want one object", got, ok)
	}
}

// Another manager's update and delete are named by Changes, and Object
// answers from the store: the new object, and none for the deleted one.
func TestChangesOfTheStore(t *testing.T) {
	e := newEnv(t, Options{})
	e.applyOwned("a", "b", "c")
	gen, ok := e.cache.Generation()
	if !ok {
		t.Fatal("the cache does not vouch for its stores")
	}
	if got, ok := e.cache.Changes(gen); !ok || len(got) != 0 {
		t.Fatalf("Changes at the current generation = %v, %t", got, ok)
	}
	if _, ok := e.cache.Changes(0); ok {
		t.Error("Changes told what changed since before the informer started")
	}
	e.driftAB()
	var got []Changed
	for deadline := time.Now().Add(time.Minute); len(got) < 2; time.Sleep(10 * time.Millisecond) {
		if got, ok = e.cache.Changes(gen); !ok {
			t.Fatal("Changes cannot tell")
		}
		if time.Now().After(deadline) {
			t.Fatalf("changes %v a minute later", got)
		}
	}
	if want := []Changed{{Kind: "ConfigMap", Name: "a"}, {Kind: "ConfigMap", Name: "b"}}; !cmp.Equal(got, want) {
		t.Errorf("Changes = %v, want %v", got, want)
	}
	ctx := ctxT(t, 10*time.Second)
	a, found, ok, err := e.cache.Object(ctx, gvkConfigMap, selector, "a")
	if err != nil || !ok || !found || a.Object["data"].(map[string]any)["k"] != "2" {
		t.Errorf("Object(a) = %v, found %t, ok %t, %v; want the updated object", a, found, ok, err)
	}
	if _, found, ok, err := e.cache.Object(ctx, gvkConfigMap, selector, "b"); err != nil || !ok || found {
		t.Errorf("Object(b): found %t, ok %t, %v; want not found", found, ok, err)
	}
	if _, _, ok, err := e.cache.Object(ctx, gvkConfigMap, "other=selector", "a"); err != nil || ok {
		t.Errorf("Object of an informer never started: ok %t, %v; want not ok", ok, err)
	}
}
