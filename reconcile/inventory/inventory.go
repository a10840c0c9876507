package inventory

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"recond.dev/recond/reconcile/hook"
	"recond.dev/recond/reconcile/keys"
)

// Inventory is what an instance remembers across restarts.
type Inventory struct {
	Kinds    []schema.GroupVersionKind
	Revision string
	// Hooks is the state of the hooks of the last revision that had any.
	Hooks *hook.State
	// UID and ResourceVersion are the ConfigMap's (empty until it exists);
	// not compared.
	UID             types.UID
	ResourceVersion string
}

// GVK is the inventory's kind: a ConfigMap.
var GVK = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}

// Name is the ConfigMap's name for an instance.
func Name(instance string) string { return keys.InventoryPrefix + instance }

// Selector selects an instance's inventory ConfigMap.
func Selector(instance string) string {
	return labels.SelectorFromSet(labels.Set{keys.LabelInventory: instance}).String()
}

// Object is the instance's inventory ConfigMap as recond applies it: its
// name, namespace and label, nothing else yet.
func Object(instance, namespace string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata": map[string]any{
			"name":      Name(instance),
			"namespace": namespace,
			"labels":    map[string]any{keys.LabelInventory: instance},
		},
	}}
}

// Add records gvk unless its group and kind are recorded already, keeping
// the list sorted.
func (inv *Inventory) Add(gvk schema.GroupVersionKind) {
	for _, k := range inv.Kinds {
		if k.GroupKind() == gvk.GroupKind() {
			return
		}
	}
	inv.Kinds = append(inv.Kinds, gvk)
	SortKinds(inv.Kinds)
}

// Equal reports whether inv and o record the same kinds, revision and
// hooks (not whether they were read from one version of the ConfigMap).
func (inv *Inventory) Equal(o *Inventory) bool {
	return inv.Revision == o.Revision && slices.Equal(inv.Kinds, o.Kinds) && inv.Hooks.Encode() == o.Hooks.Encode()
}

// Copy is a copy of what inv records (its kinds, revision and hooks),
// without the version of the ConfigMap it was read from.
func (inv *Inventory) Copy() *Inventory {
	return &Inventory{Kinds: slices.Clone(inv.Kinds), Revision: inv.Revision, Hooks: inv.Hooks.Clone()}
}

// Parse reads an inventory ConfigMap. A line it cannot read is an error,
// never skipped: a kind dropped from the inventory would never be pruned
// again.
func Parse(cm *unstructured.Unstructured) (*Inventory, error) {
	data, found, err := unstructured.NestedStringMap(cm.Object, "data")
	if err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	inv := &Inventory{}
	if !found {
		return inv, nil
	}
	inv.Revision = data["revision"]
	if inv.Hooks, err = hook.ParseState(data["hooks"]); err != nil {
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

// Data is the inventory ConfigMap's data, as Parse reads it: one
// "<group/version> <Kind>" line per kind, the revision and the hooks'
// state.
func (inv *Inventory) Data() map[string]any {
	lines := make([]string, 0, len(inv.Kinds))
	for _, k := range inv.Kinds {
		lines = append(lines, k.GroupVersion().String()+" "+k.Kind)
	}
	data := map[string]any{"kinds": strings.Join(lines, "\n"), "revision": inv.Revision}
	if inv.Hooks != nil {
		data["hooks"] = inv.Hooks.Encode()
	}
	return data
}

// SortKinds sorts kinds as the inventory lists them.
func SortKinds(k []schema.GroupVersionKind) {
	slices.SortFunc(k, func(a, b schema.GroupVersionKind) int {
		return strings.Compare(a.String(), b.String())
	})
}
