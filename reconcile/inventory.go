package reconcile

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"recond.dev/recond/reconcile/cluster"
)

// inventory is what an instance remembers across restarts, kept in a
// ConfigMap in its namespace: every kind it has applied (so that a kind that
// left Git is still listed and its objects pruned) and the last revision it
// applied in full (so that --self-heal=false can tell drift from a new
// revision).
type inventory struct {
	Kinds    []schema.GroupVersionKind
	Revision string
	// Hooks is the state of the hooks of the last revision that had any.
	Hooks *hookState
	// UID and ResourceVersion are the ConfigMap's (empty until it exists);
	// not compared.
	UID             types.UID
	ResourceVersion string
}

var configMapGVK = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}

// inventoryName is the ConfigMap's name for an instance.
func inventoryName(instance string) string { return InventoryPrefix + instance }

// add records gvk unless its group and kind are recorded already, keeping
// the list sorted.
func (inv *inventory) add(gvk schema.GroupVersionKind) {
	for _, k := range inv.Kinds {
		if k.GroupKind() == gvk.GroupKind() {
			return
		}
	}
	inv.Kinds = append(inv.Kinds, gvk)
	sortKinds(inv.Kinds)
}

func (inv *inventory) equal(o *inventory) bool {
	return inv.Revision == o.Revision && slices.Equal(inv.Kinds, o.Kinds) && inv.Hooks.encode() == o.Hooks.encode()
}

// loadInventory returns the inventory the tick works with, read once per
// tick (observe reads it; apply uses the same). The first tick of the
// process reads it from the API server. Later ticks compare the copy in
// memory with the live one, which is an owned object like the others: from
// the watch cache (--observe=watch: no request while it is unchanged) or a
// GET (--observe=list). A live one that is missing, unreadable or unlike the
// copy in memory is logged once and rewritten by the apply phase
// (repairInventory) from the copy in memory, with any kind the live one adds
// kept: a kind is never forgotten, so that its objects are still pruned
// after the next restart.
func (r *Reconciler) loadInventory(ctx context.Context, st *State) (*inventory, error) {
	if st.inv != nil {
		return st.inv, nil
	}
	mem, _ := r.inventoryState()
	if mem == nil {
		cm, err := r.getInventory(ctx)
		if err != nil {
			return nil, err
		}
		suspensionStore{r}.note(st, cm)
		inv := &inventory{}
		if cm != nil {
			if inv, err = parseInventory(cm); err != nil {
				return nil, Invalid(fmt.Errorf("inventory ConfigMap %s: %w; fix or delete it (recond rebuilds it, but cannot prune kinds it forgot)", cm.GetName(), err))
			}
			inv.UID, inv.ResourceVersion = cm.GetUID(), cm.GetResourceVersion()
		}
		sortKinds(inv.Kinds)
		if _, direct := r.live.(*cluster.Client); !direct {
			// Start watching it now, so that its deletion asks for a tick.
			if _, err := r.liveInventory(ctx); err != nil {
				return nil, err
			}
		}
		r.setInventory(inv)
		st.inv = inv
		return inv, nil
	}
	cm, err := r.liveInventory(ctx)
	if err != nil {
		return nil, err
	}
	if !sameInventory(cm, mem) {
		if _, direct := r.live.(*cluster.Client); !direct {
			// The cache may not have seen recond's own last write yet (or
			// may have lost the ConfigMap's label): the API server decides.
			if cm, err = r.getInventory(ctx); err != nil {
				return nil, err
			}
		}
	}
	suspensionStore{r}.note(st, cm)
	if sameInventory(cm, mem) {
		st.inv = mem
		return mem, nil
	}
	st.inv = r.compareInventory(ctx, mem, cm)
	return st.inv, nil
}

// sameInventory reports whether cm (nil: it does not exist) is the version
// of the inventory that recond last read or wrote, mem.
func sameInventory(cm *unstructured.Unstructured, mem *inventory) bool {
	if cm == nil {
		// Never written (nothing to record yet) and still not there.
		return mem.UID == ""
	}
	return cm.GetUID() == mem.UID && cm.GetResourceVersion() == mem.ResourceVersion
}

// compareInventory is loadInventory for a live inventory (cm, nil when it
// does not exist) that is not the version recond last read or wrote: it
// returns what the tick works with (mem's kinds and revision, and any kind
// cm adds), and, unless cm already holds exactly that with recond's label,
// marks it for rewriting and says so, once per loss.
func (r *Reconciler) compareInventory(ctx context.Context, mem *inventory, cm *unstructured.Unstructured) *inventory {
	name := inventoryName(r.cfg.Name)
	inv := &inventory{Kinds: slices.Clone(mem.Kinds), Revision: mem.Revision, Hooks: mem.Hooks.clone()}
	var what string
	switch {
	case cm == nil:
		what = "deleted"
	default:
		inv.UID, inv.ResourceVersion = cm.GetUID(), cm.GetResourceVersion()
		live, err := parseInventory(cm)
		if err != nil {
			what = fmt.Sprintf("changed and unreadable (%v)", err)
			break
		}
		for _, k := range live.Kinds {
			inv.add(k)
		}
		sortKinds(live.Kinds)
		switch {
		case cm.GetLabels()[LabelInventory] != r.cfg.Name:
			what = "stripped of its label " + LabelInventory
		case !inv.equal(live):
			what = "changed by another writer"
		default:
			// Written again with the same record (another process of the
			// instance, or a change to its metadata only): adopted.
			r.setInventory(inv)
			return inv
		}
	}
	if wasStale := r.markInventoryStale(inv); !wasStale {
		r.log.WarnContext(ctx, "inventory ConfigMap "+what+"; rewriting it from the copy in memory (without it a restart would forget kinds that left Git, and not prune them)",
			"configmap", name, "kinds", len(inv.Kinds), "revision", shortSHA(inv.Revision))
	}
	return inv
}

// liveInventory returns the live inventory ConfigMap, nil when it does not
// exist: from the watch cache when observing by watch (label-selected, no
// request once synced), else by GET.
func (r *Reconciler) liveInventory(ctx context.Context) (*unstructured.Unstructured, error) {
	if _, direct := r.live.(*cluster.Client); direct {
		return r.getInventory(ctx)
	}
	name := inventoryName(r.cfg.Name)
	selector := inventorySelector(r.cfg.Name)
	lctx, span := startSpan(ctx, "recond.list", kindAttr("ConfigMap"), attribute.String("k8s.label_selector", selector))
	items, err := r.live.List(lctx, configMapGVK, selector)
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

// inventoryIsOwnWrite reports whether the live inventory (from the watch
// cache) is the version recond last wrote or read.
func (r *Reconciler) inventoryIsOwnWrite() bool {
	mem, stale := r.inventoryState()
	if mem == nil || stale {
		return false
	}
	cm, err := r.liveInventory(context.Background())
	return err == nil && sameInventory(cm, mem)
}

// getInventory GETs the inventory ConfigMap from the API server; nil when
// it does not exist.
func (r *Reconciler) getInventory(ctx context.Context) (*unstructured.Unstructured, error) {
	gctx, span := startSpan(ctx, "recond.get", kindAttr("ConfigMap"), attribute.String("k8s.name", inventoryName(r.cfg.Name)))
	cm, err := r.kube.Get(gctx, configMapGVK, inventoryName(r.cfg.Name))
	endSpan(span, err)
	if err != nil {
		return nil, fmt.Errorf("read inventory: %w", err)
	}
	return cm, nil
}

// inventorySelector selects an instance's inventory ConfigMap.
func inventorySelector(instance string) string {
	return labels.SelectorFromSet(labels.Set{LabelInventory: instance}).String()
}

// parseInventory reads an inventory ConfigMap. A line it cannot read is an
// error, never skipped: a kind dropped from the inventory would never be
// pruned again.
func parseInventory(cm *unstructured.Unstructured) (*inventory, error) {
	data, found, err := unstructured.NestedStringMap(cm.Object, "data")
	if err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	inv := &inventory{}
	if !found {
		return inv, nil
	}
	inv.Revision = data["revision"]
	if inv.Hooks, err = parseHookState(data["hooks"]); err != nil {
		return nil, err
	}
	for i, line := range strings.Split(data["kinds"], "\n") {
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		gv, kind, ok := strings.Cut(line, " ")
		if !ok || kind == "" || strings.ContainsAny(kind, " \t/") {
			return nil, fmt.Errorf("kinds line %d %q: want \"<group/version> <Kind>\"", i+1, line)
		}
		parsed, err := schema.ParseGroupVersion(gv)
		if err != nil || parsed.Version == "" {
			return nil, fmt.Errorf("kinds line %d %q: bad group/version %q", i+1, line, gv)
		}
		inv.Kinds = append(inv.Kinds, parsed.WithKind(kind))
	}
	return inv, nil
}

// data is the inventory ConfigMap's data, as parseInventory reads it: one
// "<group/version> <Kind>" line per kind, and the revision.
func (inv *inventory) data() map[string]any {
	lines := make([]string, 0, len(inv.Kinds))
	for _, k := range inv.Kinds {
		lines = append(lines, k.GroupVersion().String()+" "+k.Kind)
	}
	data := map[string]any{"kinds": strings.Join(lines, "\n"), "revision": inv.Revision}
	if inv.Hooks != nil {
		data["hooks"] = inv.Hooks.encode()
	}
	return data
}

// saveInventory writes inv when it differs from what is stored, or when
// the live inventory was found missing or changed (repairInventory).
func (r *Reconciler) saveInventory(ctx context.Context, inv *inventory) error {
	if cur, stale := r.inventoryState(); cur != nil && !stale && cur.equal(inv) {
		return nil
	}
	if err := r.mayWrite(); err != nil {
		return err
	}
	cm := r.inventoryObject()
	cm.Object["data"] = inv.data()
	out, err := r.kube.ApplyFor(ctx, cluster.Write{Purpose: cluster.PurposeInventory, Object: cm}, nil)
	if err != nil {
		return fmt.Errorf("write inventory: %w", err)
	}
	inv.UID, inv.ResourceVersion = out.GetUID(), out.GetResourceVersion()
	r.setInventory(inv)
	return nil
}

// inventoryObject is the instance's inventory ConfigMap as recond applies
// it: its name, namespace and label, nothing else yet.
func (r *Reconciler) inventoryObject() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata": map[string]any{
			"name":      inventoryName(r.cfg.Name),
			"namespace": r.cfg.Namespace,
			"labels":    map[string]any{LabelInventory: r.cfg.Name},
		},
	}}
}

// repairInventory rewrites the inventory when this tick found the live one
// missing or unlike the copy in memory (loadInventory), whatever else the
// tick writes: inv is what the tick works with.
func (r *Reconciler) repairInventory(ctx context.Context, inv *inventory) error {
	if _, stale := r.inventoryState(); !stale {
		return nil
	}
	if err := r.saveInventory(ctx, inv); err != nil {
		return err
	}
	r.log.InfoContext(ctx, "inventory ConfigMap rewritten", "configmap", inventoryName(r.cfg.Name),
		"kinds", len(inv.Kinds), "revision", shortSHA(inv.Revision))
	return nil
}

// keepInventory compares the live inventory with the copy in memory and
// rewrites it when it is missing or different, before any phase runs: a
// tick that fails in read (a broken commit, an unreachable Git) would
// otherwise never reach the apply phase's repair, and a restart then would
// forget the kinds only this process remembers. Before the first load
// (the observe phase's) there is nothing to keep. A failure here is left
// to the phases: observe reads the inventory again, and apply repairs it.
func (r *Reconciler) keepInventory(ctx context.Context, st *State) {
	if r.inventory() == nil {
		return
	}
	inv, err := r.loadInventory(ctx, st)
	if err == nil {
		err = r.repairInventory(ctx, inv)
	}
	if err != nil {
		st.inv = nil
		r.log.DebugContext(ctx, "inventory not checked before the phases; the phases will", "err", err)
	}
}

// inventory is the copy in memory (nil until first loaded). The lock is for
// a phase that outlived its tick (abandoned) and returns during a later one.
func (r *Reconciler) inventory() *inventory {
	inv, _ := r.inventoryState()
	return inv
}

// inventoryState is the copy in memory and whether the live inventory was
// found missing or unlike it since recond last wrote it.
func (r *Reconciler) inventoryState() (*inventory, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inv, r.invStale
}

// setInventory records what the server holds now (or held when read).
func (r *Reconciler) setInventory(inv *inventory) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inv, r.invStale = inv, false
}

// markInventoryStale records inv as the copy in memory, to be written
// whatever the server holds, and reports whether it was marked already
// (the loss was reported).
func (r *Reconciler) markInventoryStale(inv *inventory) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	was := r.invStale
	r.inv, r.invStale = inv, true
	return was
}

func sortKinds(k []schema.GroupVersionKind) {
	slices.SortFunc(k, func(a, b schema.GroupVersionKind) int {
		return strings.Compare(a.String(), b.String())
	})
}
