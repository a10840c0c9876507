// Package keys holds every label and annotation key recond reads or
// writes, and the name prefixes it keeps for its own objects: one file, so
// that a rule that reads a key and the code that writes it cannot drift
// apart. The names and values are a contract (docs/labels.md,
// docs/optouts.md, docs/secrets.md, docs/operations.md); package reconcile
// re-exports them under the same names.
package keys

// The labels and annotations recond puts on every object it applies. Users
// select on them and pruning depends on them.
const (
	// LabelManagedBy marks objects recond owns; its value is ManagedByValue.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is the value of LabelManagedBy.
	ManagedByValue = "recond"
	// LabelInstance holds --name, so that two recond instances in one
	// namespace never prune each other's objects.
	LabelInstance = "recond.dev/instance"
	// AnnotationRevision is the revision at which the object was last
	// applied. It is not compared by the diff.
	AnnotationRevision = "recond.dev/revision"
	// AnnotationSource is "<repository URL without credentials>#<path>".
	AnnotationSource = "recond.dev/source"
	// AnnotationMaskedFields names, on an object that holds a value recond
	// decrypted, the fields that hold one (paths, never values).
	AnnotationMaskedFields = "recond.dev/masked-fields"
	// AnnotationGeneratedInputs records, on a chart's object with
	// generated-once fields, a fingerprint of each such field's ordinary
	// inputs: the field is written again when they change.
	AnnotationGeneratedInputs = "recond.dev/generated-inputs"
	// LabelInventory marks the ConfigMap in which an instance records the
	// kinds it has applied and the last revision it applied in full.
	LabelInventory = "recond.dev/inventory"
	// LabelHook marks the hook objects an instance created (value: the
	// instance). They are not owned: never diffed, never pruned.
	LabelHook = "recond.dev/hook"
)

// The per-object opt-outs: annotations an object carries in Git (and, for
// AnnotationReconcile and AnnotationPrune, on the live object too) that
// take it, or part of it, out of the loop's hands.
const (
	// AnnotationReconcile "disabled": the object is neither written, healed,
	// pruned nor replaced by a hook.
	AnnotationReconcile = "recond.dev/reconcile"
	// AnnotationApply "create-only": created when missing, never updated.
	AnnotationApply = "recond.dev/apply"
	// AnnotationPrune "disabled": never deleted; when it leaves Git it
	// loses recond's labels (it is orphaned).
	AnnotationPrune = "recond.dev/prune"
	// AnnotationIgnoreFields is a comma-separated list of JSON pointers to
	// fields that are neither compared nor sent.
	AnnotationIgnoreFields = "recond.dev/ignore-fields"
	// AnnotationForce "recreate": a change the API server refuses as
	// immutable is made by deleting and creating the object.
	AnnotationForce = "recond.dev/force"
)

// The annotations of a chart's hooks (Helm's).
const (
	AnnotationHook       = "helm.sh/hook"
	AnnotationHookWeight = "helm.sh/hook-weight"
	AnnotationHookDelete = "helm.sh/hook-delete-policy"
)

// The annotations on an instance's inventory ConfigMap that hold its
// suspension.
const (
	AnnotationSuspendedUntil = "recond.dev/suspended-until"
	AnnotationSuspendReason  = "recond.dev/suspend-reason"
	AnnotationSuspendedBy    = "recond.dev/suspended-by"
)

// Name prefixes recond keeps for its own objects in the namespace: its
// inventory ConfigMap, its leader-election Lease and its seed Secret. Git
// may not name an object with one of them, whatever its kind.
const (
	InventoryPrefix = "recond-inventory-"
	LeasePrefix     = "recond-leader-"
	// SeedPrefix names the Secret that holds the instance's seed for the
	// random functions of a chart's templates: recond-seed-<name>.
	SeedPrefix = "recond-seed-"
)

// DefaultKeysSecret is the name of the Secret that holds the SOPS age keys
// (--sops-keys-secret): reserved like the prefixes above, so that no commit
// can overwrite, prune or replace it.
const DefaultKeysSecret = "recond-sops"
