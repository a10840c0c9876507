package inventory

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"recond.dev/recond/reconcile/keys"
)

// Same reports whether cm (nil: it does not exist) is the version of the
// inventory that recond last read or wrote, mem.
func Same(cm *unstructured.Unstructured, mem *Inventory) bool {
	if cm == nil {
		// Never written (nothing to record yet) and still not there.
		return mem.UID == ""
	}
	return cm.GetUID() == mem.UID && cm.GetResourceVersion() == mem.ResourceVersion
}

// Compare compares instance's live inventory cm (nil when it does not
// exist), which is not the version recond last read or wrote (Same), with
// the copy in memory, mem. It returns what a tick works with: mem's kinds,
// revision and hooks, and any kind cm adds (a kind is never forgotten, so
// that its objects are still pruned after the next restart). lost says
// what happened to the live one when it must be written again ("deleted",
// "changed by another writer"); "" when cm holds exactly that record, with
// recond's label (another process of the instance wrote it again, or only
// its metadata changed): it is adopted.
func Compare(mem *Inventory, cm *unstructured.Unstructured, instance string) (inv *Inventory, lost string) {
	inv = mem.Copy()
	if cm == nil {
		return inv, "deleted"
	}
	inv.UID, inv.ResourceVersion = cm.GetUID(), cm.GetResourceVersion()
	live, err := Parse(cm)
	if err != nil {
		return inv, fmt.Sprintf("changed and unreadable (%v)", err)
	}
	for _, k := range live.Kinds {
		inv.Add(k)
	}
	SortKinds(live.Kinds)
	switch {
	case cm.GetLabels()[keys.LabelInventory] != instance:
		return inv, "stripped of its label " + keys.LabelInventory
	case !inv.Equal(live):
		return inv, "changed by another writer"
	}
	return inv, ""
}
