package watch

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// journalSize is how many store changes the cache remembers by name
// (Changes): a caller further behind than that gets ok false, and walks
// everything.
const journalSize = 4096

// Changed names one object whose store entry changed: added, updated or
// deleted, by anyone (recond's own writes included).
type Changed struct {
	Group, Kind, Name string
}

// journal records, for each move of the Cache's generation, what moved
// it: the object changed, or an informer started (a reset: its first
// sync adds every object, and a restart's store is a new one).
type journal struct {
	mu sync.Mutex
	// entries are the last changes, oldest first, each with the generation
	// it moved the Cache to.
	entries []journalEntry
	// lost is the newest generation whose change is no longer in entries;
	// reset the newest that started an informer.
	lost, reset uint64
}

type journalEntry struct {
	gen uint64
	obj Changed
}

// bump moves the generation for a change of obj and records it; nil (an
// informer started, or an object of a type an unstructured informer never
// holds) is a reset, so that no caller of Changes misses it. The store holds the change already (the
// informer's handlers run after it).
func (c *Cache) bump(gk schema.GroupKind, obj *unstructured.Unstructured) {
	j := &c.journal
	j.mu.Lock()
	defer j.mu.Unlock()
	gen := c.gen.Add(1)
	if obj == nil {
		j.reset = gen
		return
	}
	if len(j.entries) == journalSize {
		// Half of them go at once, so that the copy is rare.
		j.lost = j.entries[journalSize/2-1].gen
		n := copy(j.entries, j.entries[journalSize/2:])
		j.entries = j.entries[:n]
	}
	j.entries = append(j.entries, journalEntry{gen: gen, obj: Changed{Group: gk.Group, Kind: gk.Kind, Name: obj.GetName()}})
}

// Changes returns the objects whose store entries changed after the
// generation since (Generation), each once, oldest first: what a caller
// that read everything at since must read again, and nothing else. ok is
// false when the cache cannot tell: an informer started or restarted
// since then (a new store), or more changes came than it remembers. It
// makes no request and costs the changes, not the objects cached.
func (c *Cache) Changes(since uint64) (changed []Changed, ok bool) {
	j := &c.journal
	j.mu.Lock()
	defer j.mu.Unlock()
	if since < j.reset || since < j.lost {
		return nil, false
	}
	// Entries are in generation order: the first one after since is found
	// by a binary search, and only the ones after it are read.
	lo, hi := 0, len(j.entries)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if j.entries[m].gen <= since {
			lo = m + 1
		} else {
			hi = m
		}
	}
	seen := make(map[Changed]bool, len(j.entries)-lo)
	for _, e := range j.entries[lo:] {
		if !seen[e.obj] {
			seen[e.obj] = true
			changed = append(changed, e.obj)
		}
	}
	return changed, true
}

// Object returns one object of the store of the informer (gvk, selector)
// as List would return it (the store's own, not a copy: the caller must
// not modify it), found false when the store does not hold it. Unlike
// Get, it never asks the API server: it is for a caller that knows from
// Changes which objects to read again. ok is false when that informer is
// not running, synced and fed by a watch (the caller should List); a
// stale one is restarted first, as List does.
func (c *Cache) Object(ctx context.Context, gvk schema.GroupVersionKind, selector, name string) (u *unstructured.Unstructured, found, ok bool, err error) {
	m, err := c.mapping(gvk)
	if err != nil {
		return nil, false, false, err
	}
	c.mu.Lock()
	k := c.informers[informerKey{gvk: m.GroupVersionKind, selector: selector}]
	c.mu.Unlock()
	if k == nil || !k.inf.HasSynced() || k.failing() != nil {
		return nil, false, false, nil
	}
	if k, err = c.fresh(ctx, k); err != nil {
		return nil, false, false, err
	}
	o, exists, err := k.inf.GetStore().GetByKey(c.namespace + "/" + name)
	if err != nil || !exists {
		return nil, false, err == nil, err
	}
	s, isU := o.(*unstructured.Unstructured)
	if !isU {
		return nil, false, false, nil
	}
	// A new wrapper of the same map, as List hands out.
	return &unstructured.Unstructured{Object: s.Object}, true, true, nil
}
