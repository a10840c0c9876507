package reconcile

import (
	"k8s.io/apimachinery/pkg/labels"

	"recond.dev/recond/reconcile/diff"
	"recond.dev/recond/reconcile/keys"
)

// The labels and annotations recond puts on every object it applies. They
// are a contract: users select on them and pruning depends on them.
const (
	// LabelManagedBy marks objects recond owns; its value is ManagedByValue.
	LabelManagedBy = keys.LabelManagedBy
	// ManagedByValue is the value of LabelManagedBy.
	ManagedByValue = keys.ManagedByValue
	// LabelInstance holds --name, so that two recond instances in one
	// namespace never prune each other's objects.
	LabelInstance = keys.LabelInstance
	// AnnotationRevision is the commit SHA at which the object was last
	// applied. It is not compared by the diff: an object unchanged by a new
	// commit keeps the revision it was last written at.
	AnnotationRevision = keys.AnnotationRevision
	// AnnotationSource is "<repository URL without credentials>#<path>".
	AnnotationSource = keys.AnnotationSource
	// AnnotationMaskedFields names, on an object that holds a value recond
	// decrypted, the fields that hold one (paths, never values): every
	// later difference in them is masked (docs/secrets.md).
	AnnotationMaskedFields = diff.MaskedFieldsAnnotation
	// LabelInventory marks the ConfigMap in which an instance records the
	// kinds it has applied and the last revision it applied in full.
	LabelInventory = keys.LabelInventory
)

// The per-object opt-outs (reconcile/optout): annotations an object
// carries in Git (and, for AnnotationReconcile, on the live object too)
// that take it, or part of it, out of the loop's hands. The names and
// values are a contract.
const (
	// AnnotationReconcile "disabled": the object is neither written, healed
	// nor pruned; it is counted and listed as skipped.
	AnnotationReconcile = keys.AnnotationReconcile
	// AnnotationApply "create-only": created when missing, never updated.
	AnnotationApply = keys.AnnotationApply
	// AnnotationPrune "disabled": never deleted; when it leaves Git it
	// loses recond's labels (it is orphaned), with an Event.
	AnnotationPrune = keys.AnnotationPrune
	// AnnotationIgnoreFields is a comma-separated list of JSON pointers
	// (RFC 6901) to fields that are neither compared nor sent, so that
	// another manager may own them: "/spec/replicas,/data/generated".
	AnnotationIgnoreFields = keys.AnnotationIgnoreFields
	// AnnotationForce "recreate": a change the API server refuses because
	// it touches a field that cannot change once set (a Deployment's
	// selector, a Job's template, a Service's clusterIP) is made by
	// deleting the object (foreground: its dependents first) and creating
	// it anew, within the tick. Never for a PersistentVolumeClaim: its data
	// would go with it.
	AnnotationForce = keys.AnnotationForce
)

// The annotations on an instance's inventory ConfigMap that hold its
// suspension (reconcile/suspend): one truth for every process of the
// instance (a restart, a standby that takes over), for `recond suspend`,
// POST /api/v1/suspend and `kubectl annotate` alike. The names are a
// contract.
const (
	// AnnotationSuspendedUntil is when the suspension ends by itself
	// (RFC 3339). Missing, unreadable or further than --suspend-max away
	// while another suspension annotation is set, it is written as
	// --suspend-max from when recond first saw the suspension.
	AnnotationSuspendedUntil = keys.AnnotationSuspendedUntil
	// AnnotationSuspendReason says why, in the operator's words.
	AnnotationSuspendReason = keys.AnnotationSuspendReason
	// AnnotationSuspendedBy says who.
	AnnotationSuspendedBy = keys.AnnotationSuspendedBy
)

// The annotations of a chart's hooks (Helm's; reconcile/hook), and the
// label recond puts on the hook objects it creates.
const (
	AnnotationHook       = keys.AnnotationHook
	AnnotationHookWeight = keys.AnnotationHookWeight
	AnnotationHookDelete = keys.AnnotationHookDelete
	// LabelHook marks the hook objects an instance created (value: the
	// instance). They are not owned: never diffed, never pruned.
	LabelHook = keys.LabelHook
)

// Name prefixes recond keeps for its own objects in the namespace: its
// inventory ConfigMap and its leader-election Lease. Git may not name an
// object with one of them, whatever its kind, so that no repository can
// overwrite another instance's state.
const (
	InventoryPrefix = keys.InventoryPrefix
	LeasePrefix     = keys.LeasePrefix
	// SeedPrefix names the Secret that holds the instance's seed for the
	// random functions of a chart's templates: recond-seed-<name>.
	SeedPrefix = keys.SeedPrefix
)

// LeaseName is the name of the Lease that instance's leader holds.
func LeaseName(instance string) string { return LeasePrefix + instance }

// ownerSelector selects the objects instance owns.
func ownerSelector(instance string) string {
	return labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedByValue, LabelInstance: instance}).String()
}

// ownedBy reports whether an object's labels say instance owns it.
func ownedBy(l map[string]string, instance string) bool {
	return l[LabelManagedBy] == ManagedByValue && l[LabelInstance] == instance
}
