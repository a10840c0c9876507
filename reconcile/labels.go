package reconcile

import (
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"recond.dev/recond/reconcile/diff"
)

// The labels and annotations recond puts on every object it applies. They
// are a contract: users select on them and pruning depends on them.
const (
	// LabelManagedBy marks objects recond owns; its value is ManagedByValue.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is the value of LabelManagedBy.
	ManagedByValue = "recond"
	// LabelInstance holds --name, so that two recond instances in one
	// namespace never prune each other's objects.
	LabelInstance = "recond.dev/instance"
	// AnnotationRevision is the commit SHA at which the object was last
	// applied. It is not compared by the diff: an object unchanged by a new
	// commit keeps the revision it was last written at.
	AnnotationRevision = "recond.dev/revision"
	// AnnotationSource is "<repository URL without credentials>#<path>".
	AnnotationSource = "recond.dev/source"
	// AnnotationMaskedFields names, on an object that holds a value recond
	// decrypted, the fields that hold one (paths, never values): every
	// later difference in them is masked (docs/secrets.md).
	AnnotationMaskedFields = diff.MaskedFieldsAnnotation
	// LabelInventory marks the ConfigMap in which an instance records the
	// kinds it has applied and the last revision it applied in full.
	LabelInventory = "recond.dev/inventory"
)

// Name prefixes recond keeps for its own objects in the namespace: its
// inventory ConfigMap and its leader-election Lease. Git may not name an
// object with one of them, whatever its kind, so that no repository can
// overwrite another instance's state.
const (
	InventoryPrefix = "recond-inventory-"
	LeasePrefix     = "recond-leader-"
	// SeedPrefix names the Secret that holds the instance's seed for the
	// random functions of a chart's templates: recond-seed-<name>.
	SeedPrefix = "recond-seed-"
)

// reservedPrefixes lists every name prefix recond uses for itself.
var reservedPrefixes = []string{InventoryPrefix, LeasePrefix, SeedPrefix}

// LeaseName is the name of the Lease that instance's leader holds.
func LeaseName(instance string) string { return LeasePrefix + instance }

// reservedName reports the reserved prefix name starts with, or "".
func reservedName(name string) string {
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(name, p) {
			return p
		}
	}
	return ""
}

// ownerSelector selects the objects instance owns.
func ownerSelector(instance string) string {
	return labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedByValue, LabelInstance: instance}).String()
}

// ownedBy reports whether an object's labels say instance owns it.
func ownedBy(l map[string]string, instance string) bool {
	return l[LabelManagedBy] == ManagedByValue && l[LabelInstance] == instance
}
