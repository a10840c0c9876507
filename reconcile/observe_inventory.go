package reconcile

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"recond.dev/recond/reconcile/cluster"
	"recond.dev/recond/reconcile/inventory"
)

// inventoryStore reads and writes the instance's inventory ConfigMap for
// the ticks (its schema is in reconcile/inventory): read once per tick
// (observe), compared with the copy in memory, written by the apply phase
// when what it records changes or the live one was lost.
type inventoryStore struct{ r *Reconciler }

// load returns the inventory the tick works with, read once per tick
// (observe reads it; apply uses the same). The first tick of the process
// reads it from the API server. Later ticks compare the copy in memory
// with the live one, which is an owned object like the others: from the
// watch cache (--observe=watch: no request while it is unchanged) or a GET
// (--observe=list). A live one that is missing, unreadable or unlike the
// copy in memory is logged once and rewritten by the apply phase (repair)
// from the copy in memory, with any kind the live one adds kept: a kind is
// never forgotten, so that its objects are still pruned after the next
// restart.
func (s inventoryStore) load(ctx context.Context, st *State) (*inventory.Inventory, error) {
	r := s.r
	if st.inv != nil {
		return st.inv, nil
	}
	mem, _ := r.mem.inventoryState()
	if mem == nil {
		cm, err := s.get(ctx)
		if err != nil {
			return nil, err
		}
		suspensionStore{r}.note(st, cm)
		inv := &inventory.Inventory{}
		if cm != nil {
			if inv, err = inventory.Parse(cm); err != nil {
				return nil, Invalid(fmt.Errorf("inventory ConfigMap %s: %w; fix or delete it (recond rebuilds it, but cannot prune kinds it forgot)", cm.GetName(), err))
			}
			inv.UID, inv.ResourceVersion = cm.GetUID(), cm.GetResourceVersion()
		}
		inventory.SortKinds(inv.Kinds)
		if _, direct := r.live.(*cluster.Client); !direct {
			// Start watching it now, so that its deletion asks for a tick.
			if _, err := s.live(ctx); err != nil {
				return nil, err
			}
		}
		r.mem.setInventory(inv)
		st.inv = inv
		return inv, nil
	}
	cm, err := s.live(ctx)
	if err != nil {
		return nil, err
	}
	if !inventory.Same(cm, mem) {
		if _, direct := r.live.(*cluster.Client); !direct {
			// The cache may not have seen recond's own last write yet (or
			// may have lost the ConfigMap's label): the API server decides.
			if cm, err = s.get(ctx); err != nil {
				return nil, err
			}
		}
	}
	suspensionStore{r}.note(st, cm)
	if inventory.Same(cm, mem) {
		st.inv = mem
		return mem, nil
	}
	st.inv = s.compare(ctx, mem, cm)
	return st.inv, nil
}

// compare is load for a live inventory (cm, nil when it does not exist)
// that is not the version recond last read or wrote: it returns what the
// tick works with (inventory.Compare), and, unless cm already holds
// exactly that with recond's label, marks it for rewriting and says so,
// once per loss.
func (s inventoryStore) compare(ctx context.Context, mem *inventory.Inventory, cm *unstructured.Unstructured) *inventory.Inventory {
	r := s.r
	inv, lost := inventory.Compare(mem, cm, r.cfg.Name)
	if lost == "" {
		r.mem.setInventory(inv)
		return inv
	}
	if wasStale := r.mem.markInventoryStale(inv); !wasStale {
		r.log.WarnContext(ctx, "inventory ConfigMap "+lost+"; rewriting it from the copy in memory (without it a restart would forget kinds that left Git, and not prune them)",
			"configmap", inventory.Name(r.cfg.Name), "kinds", len(inv.Kinds), "revision", shortSHA(inv.Revision))
	}
	return inv
}

// live returns the live inventory ConfigMap, nil when it does not exist:
// from the watch cache when observing by watch (label-selected, no request
// once synced), else by GET.
func (s inventoryStore) live(ctx context.Context) (*unstructured.Unstructured, error) {
	r := s.r
	if _, direct := r.live.(*cluster.Client); direct {
		return s.get(ctx)
	}
	name := inventory.Name(r.cfg.Name)
	selector := inventory.Selector(r.cfg.Name)
	lctx, span := startSpan(ctx, "recond.list", kindAttr("ConfigMap"), attribute.String("k8s.label_selector", selector))
	items, err := r.live.List(lctx, inventory.GVK, selector)
	endSpan(span, err)
	if err != nil {
		return nil, fmt.Errorf("read inventory: %w", err)
	}
	for i := range items {
		if items[i].GetName() == name {
			return &items[i], nil
		}
	}
	return nil, nil
}

// ownWrite reports whether the live inventory (from the watch cache) is
// the version recond last wrote or read.
func (s inventoryStore) ownWrite() bool {
	mem, stale := s.r.mem.inventoryState()
	if mem == nil || stale {
		return false
	}
	cm, err := s.live(context.Background())
	return err == nil && inventory.Same(cm, mem)
}

// get GETs the inventory ConfigMap from the API server; nil when it does
// not exist.
func (s inventoryStore) get(ctx context.Context) (*unstructured.Unstructured, error) {
	name := inventory.Name(s.r.cfg.Name)
	gctx, span := startSpan(ctx, "recond.get", kindAttr("ConfigMap"), attribute.String("k8s.name", name))
	cm, err := s.r.kube.Get(gctx, inventory.GVK, name)
	endSpan(span, err)
	if err != nil {
		return nil, fmt.Errorf("read inventory: %w", err)
	}
	return cm, nil
}

// keep compares the live inventory with the copy in memory and rewrites
// it when it is missing or different, before any phase runs: a tick that
// fails in read (a broken commit, an unreachable Git) would otherwise
// never reach the apply phase's repair, and a restart then would forget
// the kinds only this process remembers. Before the first load (the
// observe phase's) there is nothing to keep. A failure here is left to the
// phases: observe reads the inventory again, and apply repairs it.
func (s inventoryStore) keep(ctx context.Context, st *State) {
	if s.r.mem.inventory() == nil {
		return
	}
	inv, err := s.load(ctx, st)
	if err == nil {
		err = s.repair(ctx, inv)
	}
	if err != nil {
		st.inv = nil
		s.r.log.DebugContext(ctx, "inventory not checked before the phases; the phases will", "err", err)
	}
}
