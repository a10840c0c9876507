package reconcile

import (
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"recond.dev/recond/reconcile/inventory"
)

// ownership is what the apply phase knows of the objects this instance
// owns: their objectKeys (the live objects whose labels say so, then those
// the tick writes, less those it prunes or orphans), and how many of them
// are objects of State.Live, by the kind they were read as, for the
// inventory (nextInventory). A full tick makes it from every live object;
// an incremental one takes the last tick's (deltaMemo.owned) corrected for
// the objects it read again (deltaFor): neither the apply phase nor the
// inventory then walks the namespace.
type ownership struct {
	// keys are the owned objects by objectKey, each with the kind it is
	// counted as in kinds (zero: not counted, no live object was known).
	keys map[string]liveKind
	// kinds counts the owned objects of State.Live by apiVersion and kind.
	kinds map[liveKind]int
}

// liveKind is a live object's apiVersion and kind, as read (not parsed:
// cheaper to count).
type liveKind struct{ apiVersion, kind string }

func kindOf(u *unstructured.Unstructured) liveKind {
	return liveKind{apiVersion: u.GetAPIVersion(), kind: u.GetKind()}
}

func (k liveKind) gvk() schema.GroupVersionKind {
	return schema.FromAPIVersionAndKind(k.apiVersion, k.kind)
}

// ownershipOf is the ownership of the live objects: those whose labels
// say instance owns them.
func ownershipOf(live []*unstructured.Unstructured, instance string) *ownership {
	o := &ownership{keys: make(map[string]liveKind, len(live)), kinds: map[liveKind]int{}}
	for _, l := range live {
		if ownedBy(l.GetLabels(), instance) {
			o.own(objectKey(l), l)
		}
	}
	return o
}

// own records the object at key as owned, counted as live's kind: live is
// the object of State.Live at key, nil when there is none (an object
// about to be created). An object owned already stays as it was counted.
func (o *ownership) own(key string, live *unstructured.Unstructured) {
	if _, ok := o.keys[key]; ok {
		return
	}
	var k liveKind
	if live != nil {
		k = kindOf(live)
		o.kinds[k]++
	}
	o.keys[key] = k
}

// disown records the object at key as not owned (any more).
func (o *ownership) disown(key string) {
	k, ok := o.keys[key]
	if !ok {
		return
	}
	delete(o.keys, key)
	if k == (liveKind{}) {
		return
	}
	if o.kinds[k]--; o.kinds[k] <= 0 {
		delete(o.kinds, k)
	}
}

// owns reports whether the object at key is owned.
func (o *ownership) owns(key string) bool {
	_, ok := o.keys[key]
	return ok
}

// size is how many objects are owned.
func (o *ownership) size() int { return len(o.keys) }

// desiredKinds are the kinds of a render's objects as the inventory
// records them (the first version of each kind in the render's order),
// made once per render.
func (ix *desiredIndex) desiredKinds() []schema.GroupVersionKind {
	ix.kindsOnce.Do(func() {
		inv := &inventory.Inventory{}
		for _, d := range ix.desired {
			inv.Add(d.GroupVersionKind())
		}
		ix.kinds = inv.Kinds
	})
	return ix.kinds
}

// nextInventory keeps every kind Git names, every kind of which this
// instance still owns an object and every recorded kind the server does not
// serve now, and records the revision as applied. It costs the number of
// kinds, not of objects: own counts the owned objects by kind.
func (t *tick) nextInventory(own *ownership) *inventory.Inventory {
	st := t.st
	inv := &inventory.Inventory{Revision: st.Revision}
	if st.inv != nil && len(st.Hooks) > 0 {
		// A revision without hooks forgets the last one's: going back to
		// it later runs its hooks again, as a new revision would.
		inv.Hooks = st.inv.Hooks.Clone()
	}
	inv.Kinds = slices.Clone(t.r.mem.indexOf(st.Desired).desiredKinds())
	// A kind Git does not name is recorded in the version its owned
	// objects were read as: one per kind (observe lists a kind in one
	// version, and reads another only for a desired object). Were there
	// two, the first owned object's, in State.Live's order, as a walk
	// would find it.
	seen := make(map[schema.GroupKind]bool, len(inv.Kinds))
	for _, k := range inv.Kinds {
		seen[k.GroupKind()] = true
	}
	extra := make([]schema.GroupVersionKind, 0, len(own.kinds))
	versions := map[schema.GroupKind]int{}
	for k := range own.kinds {
		gvk := k.gvk()
		if seen[gvk.GroupKind()] {
			continue
		}
		if versions[gvk.GroupKind()]++; versions[gvk.GroupKind()] > 1 {
			extra = nil
			for _, l := range st.Live {
				if own.owns(objectKey(l)) {
					inv.Add(l.GroupVersionKind())
				}
			}
			break
		}
		extra = append(extra, gvk)
	}
	for _, k := range extra {
		inv.Add(k)
	}
	for _, k := range st.unserved {
		inv.Add(k)
	}
	for _, k := range st.pruned {
		inv.Add(k)
	}
	return inv
}
