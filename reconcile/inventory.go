package reconcile

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// inventory is what an instance remembers across restarts, kept in a
// ConfigMap in its namespace: every kind it has applied (so that a kind that
// left Git is still listed and its objects pruned) and the last revision it
// applied in full (so that --self-heal=false can tell drift from a new
// revision).
type inventory struct {
	Kinds    []schema.GroupVersionKind
	Revision string
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
	return inv.Revision == o.Revision && slices.Equal(inv.Kinds, o.Kinds)
}

// loadInventory reads the inventory once per process; later ticks use the
// copy in memory, which apply keeps current.
func (r *Reconciler) loadInventory(ctx context.Context) (*inventory, error) {
	if inv := r.inventory(); inv != nil {
		return inv, nil
	}
	gctx, span := startSpan(ctx, "recond.get", kindAttr("ConfigMap"), attribute.String("k8s.name", inventoryName(r.cfg.Name)))
	cm, err := r.kube.Get(gctx, configMapGVK, inventoryName(r.cfg.Name))
	endSpan(span, err)
	if err != nil {
		return nil, fmt.Errorf("read inventory: %w", err)
	}
	inv := &inventory{}
	if cm != nil {
		if inv, err = parseInventory(cm); err != nil {
			return nil, Invalid(fmt.Errorf("inventory ConfigMap %s: %w; fix or delete it (recond rebuilds it, but cannot prune kinds it forgot)", cm.GetName(), err))
		}
		inv.UID, inv.ResourceVersion = cm.GetUID(), cm.GetResourceVersion()
	}
	sortKinds(inv.Kinds)
	r.setInventory(inv)
	return inv, nil
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
	return map[string]any{"kinds": strings.Join(lines, "\n"), "revision": inv.Revision}
}

// saveInventory writes inv when it differs from what is stored.
func (r *Reconciler) saveInventory(ctx context.Context, inv *inventory) error {
	if cur := r.inventory(); cur != nil && cur.equal(inv) {
		return nil
	}
	cm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata": map[string]any{
			"name":      inventoryName(r.cfg.Name),
			"namespace": r.cfg.Namespace,
			"labels":    map[string]any{LabelInventory: r.cfg.Name},
		},
		"data": inv.data(),
	}}
	out, err := r.kube.Apply(ctx, cm, false)
	if err != nil {
		return fmt.Errorf("write inventory: %w", err)
	}
	inv.UID, inv.ResourceVersion = out.GetUID(), out.GetResourceVersion()
	r.setInventory(inv)
	return nil
}

// inventory is the copy in memory (nil until first loaded). The lock is for
// a phase that outlived its tick (abandoned) and returns during a later one.
func (r *Reconciler) inventory() *inventory {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inv
}

// setInventory records what the server holds now (or held when read).
func (r *Reconciler) setInventory(inv *inventory) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inv = inv
}

func sortKinds(k []schema.GroupVersionKind) {
	slices.SortFunc(k, func(a, b schema.GroupVersionKind) int {
		return strings.Compare(a.String(), b.String())
	})
}
