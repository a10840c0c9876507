package watch

import (
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"recond.dev/recond/internal/testenv"
)

// proxiedEnv is an env whose cache talks to the API server through a fault
// proxy, its requests counted.
func proxiedEnv(t *testing.T, opts Options) (*env, *testenv.APIProxy) {
	t.Helper()
	e := newEnv(t, Options{})
	p := testenv.StartAPIProxy(t, cp.Config)
	e.reqs = &counter{}
	e.cache = e.newCache(e.reqs.wrap(p.RESTConfig()), opts)
	return e, p
}

// waitAge waits until the cache's only informer has seen nothing for
// longer than d.
func (e *env) waitAge(d time.Duration) {
	e.t.Helper()
	deadline := time.Now().Add(d + 10*time.Second)
	for e.cache.Stats().Kinds[0].Age <= d {
		if time.Now().After(deadline) {
			e.t.Fatalf("informer age still %v after %v", e.cache.Stats().Kinds[0].Age, d+10*time.Second)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitStats waits until the cache's Stats satisfy ok, for up to a minute
// (a guard against a hang).
func (e *env) waitStats(what string, ok func(Stats) bool) Stats {
	e.t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if s := e.cache.Stats(); ok(s) {
			return s
		}
	}
	e.t.Fatalf("%s: not within a minute; stats %+v", what, e.cache.Stats())
	return Stats{}
}

// events collects what OnEvent is given.
type events struct {
	mu  sync.Mutex
	got []Event
}

func (ev *events) add(e Event) {
	ev.mu.Lock()
	ev.got = append(ev.got, e)
	ev.mu.Unlock()
}

func (ev *events) list() []Event {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return append([]Event(nil), ev.got...)
}

// waitEvent waits until OnEvent was handed an event ok accepts, for up to
// a minute (a guard against a hang), and returns the events so far.
func waitEvent(t *testing.T, ev *events, what string, ok func(Event) bool) []Event {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		got := ev.list()
		for _, e := range got {
			if ok(e) {
				return got
			}
		}
	}
	t.Fatalf("no event %s within a minute; events: %+v", what, ev.list())
	return nil
}

// ignoreAt leaves Event.At out of a comparison of events.
var ignoreAt = cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".At" }, cmp.Ignore())

// applyOwned applies recond's ConfigMaps names, each with data k: "1", and
// waits until the cache lists them.
func (e *env) applyOwned(names ...string) {
	e.t.Helper()
	for _, n := range names {
		e.applyConfigMap("recond", n, true, map[string]any{"k": "1"})
	}
	e.waitListEqual(gvkConfigMap, gvrConfigMap)
}

// driftAB is another manager's work on the ConfigMaps a and b of
// applyOwned: kubectl sets a's k to "2" and b is deleted. It returns the
// events the cache should hand on for it.
func (e *env) driftAB() []Event {
	e.t.Helper()
	e.patch(gvrConfigMap, "a", "kubectl", `{"data":{"k":"2"}}`)
	e.delete(gvrConfigMap, "b")
	return []Event{{Kind: "ConfigMap", Name: "a", Type: EventUpdate, Manager: "kubectl"}, {Kind: "ConfigMap", Name: "b", Type: EventDelete}}
}

// checkListIsLIST fails the test unless the cache's List of ConfigMaps
// equals a LIST; what says when.
func (e *env) checkListIsLIST(what string) {
	e.t.Helper()
	items, err := e.cache.List(ctxT(e.t, 10*time.Second), gvkConfigMap, selector)
	if err != nil {
		e.t.Fatal(err)
	}
	if d := cmp.Diff(e.listed(gvkConfigMap, gvrConfigMap), items); d != "" {
		e.t.Errorf("List %s differs from LIST (-LIST +List):\n%s", what, d)
	}
}
