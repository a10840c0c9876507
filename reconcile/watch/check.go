package watch

import (
	"context"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Checks of a store against the API server.
const (
	// DefaultCheckEvery is Options.CheckEvery's default: a watch that
	// loses events while its bookmarks still come hides drift for this
	// long at most (plus CheckJitter of it and twice checkGrace), at the
	// cost of one LIST per kind that often (two when a difference is
	// found), and none for a kind listed meanwhile.
	DefaultCheckEvery = 5 * time.Minute
	// CheckJitter is the fraction of CheckEvery added at random to each
	// wait, so that processes started together do not check in lockstep.
	CheckJitter = 0.2
	// checkGrace is how long a difference between a check's LIST and the
	// store may last before it counts: an event on its way (recond's own
	// write a moment ago) reaches the store well within it.
	checkGrace = 2 * time.Second
	// checkPoll is how often the store is read again within checkGrace.
	checkPoll = 100 * time.Millisecond
)

// checkDelay is every plus up to CheckJitter of it, r in [0, 1).
func checkDelay(every time.Duration, r float64) time.Duration {
	return every + time.Duration(r*CheckJitter*float64(every))
}

// checks compares k's store with one LIST of the API server (names and
// resourceVersions) every Options.CheckEvery (jittered) until k is stopped.
// A watch stream that loses events but keeps sending bookmarks looks alive
// (the stale check never fires) while its store falls behind; the check
// finds that, and restarts k as the stale check does: a fresh LIST, and
// the changes the old store missed handed to OnEvent. A kind listed within
// CheckEvery (its first sync, a relist, a restart) is not checked: a full
// list was the check.
func (c *Cache) checks(ctx context.Context, k *kindInformer) {
	defer c.wg.Done()
	every := c.opts.CheckEvery
	for {
		k.mu.Lock()
		last := k.listedAt
		if k.checkedAt.After(last) {
			last = k.checkedAt
		}
		k.mu.Unlock()
		wait := checkDelay(every, rand.Float64())
		if !last.IsZero() {
			wait = time.Until(last.Add(wait))
		}
		t := time.NewTimer(max(wait, checkPoll))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		k.mu.Lock()
		recent := !k.listedAt.IsZero() && time.Since(k.listedAt) < every
		k.mu.Unlock()
		if recent || !k.inf.HasSynced() || k.failing() != nil {
			if !recent {
				k.mu.Lock()
				k.checkedAt = time.Now() // the watch's own errors show this one
				k.mu.Unlock()
			}
			continue
		}
		behind, err := c.behind(ctx, k)
		k.mu.Lock()
		k.checks++
		k.checkedAt = time.Now()
		k.mu.Unlock()
		c.checked.Add(1)
		if err != nil {
			if ctx.Err() == nil {
				c.log.Warn("could not check the watch cache against the API server", "kind", k.key.gvk.String(), "selector", k.key.selector, "error", err)
			}
			continue
		}
		if len(behind) == 0 {
			continue
		}
		next, err := c.restart(k, "the watch cache is behind the API server (a check's LIST shows changes its watch did not deliver): restarting the watch with a fresh list",
			"objects", len(behind), "first", behind[0], "check_every", every.String())
		if err != nil {
			return // closed
		}
		// Not k's context: the restart has just ended it. A sync that takes
		// longer hands on its missed changes at the next read (fresh).
		wctx, cancel := context.WithTimeout(c.ctx, time.Minute)
		if err := c.waitSynced(wctx, next); err == nil {
			c.handOnMissed(next)
		}
		cancel()
		return // next has a check of its own
	}
}

// behind returns the names of the objects whose name or resourceVersion
// differ between the API server and k's store while the store does not
// move: the store is behind. A difference counts when the store's version
// of the object (or its absence) stays as it was for checkGrace (a store
// that moves is fed by its watch: an event was on its way, or the object
// keeps changing) and a second LIST shows it too.
func (c *Cache) behind(ctx context.Context, k *kindInformer) ([]string, error) {
	var suspects map[string]bool // nil: every object
	for range 2 {
		lctx, cancel := context.WithTimeout(ctx, time.Minute)
		l, err := c.dyn.Resource(k.mapping.Resource).Namespace(c.namespace).List(lctx, metav1.ListOptions{LabelSelector: k.key.selector})
		cancel()
		if err != nil {
			return nil, err
		}
		live := make(map[string]string, len(l.Items))
		for i := range l.Items {
			live[l.Items[i].GetName()] = l.Items[i].GetResourceVersion()
		}
		out, err := c.stuck(ctx, k, live, suspects)
		if err != nil || len(out) == 0 {
			return nil, err
		}
		suspects = map[string]bool{}
		for _, name := range out {
			suspects[name] = true
		}
	}
	return slices.Sorted(maps.Keys(suspects)), nil
}

// stored is an object's resourceVersion in a store, and whether it is
// there at all.
type stored struct {
	rv string
	ok bool
}

// stuck returns the names (among only, when not nil) whose resourceVersion
// in live (name to resourceVersion) and in k's store differ, or that only
// one of them has, and whose version in the store has not moved for
// checkGrace.
func (c *Cache) stuck(ctx context.Context, k *kindInformer, live map[string]string, only map[string]bool) ([]string, error) {
	prefix := c.namespace + "/"
	store := k.inf.GetStore()
	at := func(name string) stored {
		o, ok, _ := store.GetByKey(prefix + name)
		if !ok {
			return stored{}
		}
		return stored{resourceVersion(o), true}
	}
	differ := map[string]stored{}
	for name, rv := range live {
		if s := at(name); (only == nil || only[name]) && (!s.ok || s.rv != rv) {
			differ[name] = s
		}
	}
	for _, key := range store.ListKeys() {
		name := strings.TrimPrefix(key, prefix)
		if _, ok := live[name]; !ok && (only == nil || only[name]) {
			differ[name] = at(name)
		}
	}
	deadline := time.Now().Add(checkGrace)
	for len(differ) > 0 && time.Now().Before(deadline) {
		t := time.NewTimer(checkPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		for name, was := range differ {
			if at(name) != was {
				delete(differ, name) // the watch delivers
			}
		}
	}
	return slices.Sorted(maps.Keys(differ)), nil
}

func resourceVersion(o any) string {
	if m, ok := o.(metav1.Object); ok {
		return m.GetResourceVersion()
	}
	return ""
}
