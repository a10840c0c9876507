package writerule

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"recond.dev/recond/internal/reason"
	"recond.dev/recond/reconcile/cluster"
	"recond.dev/recond/reconcile/keys"
	"recond.dev/recond/reconcile/optout"
)

// Policy is what the rules know of the instance that writes.
type Policy struct {
	// Instance is the instance's name (--name).
	Instance string
	// KeysSecret is the name of the Secret that holds the SOPS keys
	// (--sops-keys-secret): reserved. Empty: keys.DefaultKeysSecret.
	KeysSecret string
}

// Reason is the failure reason a refusal is reported with (a value of
// internal/reason's closed set).
type Reason = reason.Reason

// The reasons a refusal has.
const (
	// ReasonInvalid: the repository asks for a write recond never makes
	// (a reserved name, a hook named like an object that is not a hook).
	ReasonInvalid = reason.Invalid
	// ReasonConflict: the object is another instance's.
	ReasonConflict = reason.Conflict
)

// Refusal is a write the rules refused: which, by which rule, why.
type Refusal struct {
	Write  cluster.Write
	Rule   string
	Reason Reason
	Why    string
}

func (e *Refusal) Error() string {
	return fmt.Sprintf("refused to %s %s/%s (%s): %s", verbText(e.Write), e.Write.GVK.Kind, e.Write.Name, e.Write.Purpose, e.Why)
}

func verbText(w cluster.Write) string {
	switch w.Verb {
	case cluster.VerbDelete:
		return "delete"
	case cluster.VerbPatch:
		return "patch"
	}
	return "write"
}

// rule is one per-object rule: "" lets the write through.
type rule struct {
	name   string
	reason Reason
	check  func(p Policy, w cluster.Write) string
}

// rules are read in order; the first refusal is the answer.
var rules = []rule{
	{"reserved-name", ReasonInvalid, reservedName},
	{"ownership", ReasonConflict, foreign},
	{"hook-ownership", ReasonInvalid, hookOwnership},
	{"owned-only", ReasonInvalid, ownedOnly},
	{"opt-out", ReasonInvalid, optOut},
	{"claims", ReasonInvalid, claims},
}

// Check reads every rule for w; nil lets it through.
func Check(p Policy, w cluster.Write) error {
	for _, r := range rules {
		if why := r.check(p, w); why != "" {
			return &Refusal{Write: w, Rule: r.name, Reason: r.reason, Why: why}
		}
	}
	return nil
}

// InventoryName is the name of instance's inventory ConfigMap.
func InventoryName(instance string) string { return keys.InventoryPrefix + instance }

// Reserved reports the reserved prefix or name that name is or starts
// with, or "": a name recond keeps for its own objects (its inventory, its
// Lease, its seed, the keys Secret), which Git may not name.
func (p Policy) Reserved(name string) string {
	for _, pre := range []string{keys.InventoryPrefix, keys.LeasePrefix, keys.SeedPrefix} {
		if strings.HasPrefix(name, pre) {
			return pre
		}
	}
	if name == p.keysSecret() {
		return name
	}
	return ""
}

func (p Policy) keysSecret() string {
	if p.KeysSecret != "" {
		return p.KeysSecret
	}
	return keys.DefaultKeysSecret
}

// reservedName: the inventory and the suspension write the instance's own
// inventory ConfigMap and nothing else; no other write touches a reserved
// name.
func reservedName(p Policy, w cluster.Write) string {
	own := w.GVK.Group == "" && w.GVK.Kind == "ConfigMap" && w.Name == InventoryName(p.Instance)
	switch w.Purpose {
	case cluster.PurposeSeed:
		if w.GVK.Group != "" || w.GVK.Kind != "Secret" || w.Name != keys.SeedPrefix+p.Instance || w.Verb != cluster.VerbCreate {
			return "the seed is created as Secret " + keys.SeedPrefix + p.Instance + " only"
		}
		return ""
	case cluster.PurposeInventory, cluster.PurposeSuspension:
		if !own {
			return "the inventory and the suspension are written on " + InventoryName(p.Instance) + " only"
		}
		return ""
	}
	if r := p.Reserved(w.Name); r != "" {
		return fmt.Sprintf("the name %q is recond's own (its inventory, Lease, seed or SOPS keys: reserved %q)", w.Name, r)
	}
	return ""
}

// Owner is the instance that owns an object by its labels ("": none).
func Owner(u *unstructured.Unstructured) string {
	if u == nil {
		return ""
	}
	l := u.GetLabels()
	if l[keys.LabelManagedBy] != keys.ManagedByValue {
		return ""
	}
	return l[keys.LabelInstance]
}

// HookOf is the instance whose hook an object is ("": not a hook).
func HookOf(u *unstructured.Unstructured) string {
	if u == nil {
		return ""
	}
	return u.GetLabels()[keys.LabelHook]
}

// foreign: another instance's object is never written, whatever the
// purpose.
func foreign(p Policy, w cluster.Write) string {
	if o := Owner(w.Live); o != "" && o != p.Instance {
		return "it is owned by instance " + o
	}
	if h := HookOf(w.Live); h != "" && h != p.Instance {
		return "it is a hook of instance " + h
	}
	return ""
}

// hookOwnership: a hook replaces, and its delete policies delete, only a
// hook of this instance: never an owned object, another instance's, or an
// object made by hand. And it creates only what it labels as its hook.
func hookOwnership(p Policy, w cluster.Write) string {
	if w.Purpose != cluster.PurposeHook {
		return ""
	}
	if w.Object != nil && HookOf(w.Object) != p.Instance {
		return "a hook is applied with the label " + keys.LabelHook + "=" + p.Instance
	}
	if w.Live == nil {
		if w.Verb == cluster.VerbDelete {
			return "the object to delete is not known"
		}
		return ""
	}
	if HookOf(w.Live) == p.Instance {
		return ""
	}
	if Owner(w.Live) == p.Instance {
		return "an object of this instance has the hook's kind and name; a hook replaces only an earlier run of a hook: rename the hook"
	}
	return "an object recond did not make (no " + keys.LabelHook + " label) has the hook's kind and name; a hook replaces only an earlier run of a hook: rename the hook"
}

// ownedOnly: a prune, an orphaning and a recreate's delete touch only what
// this instance owns.
func ownedOnly(p Policy, w cluster.Write) string {
	switch w.Purpose {
	case cluster.PurposePrune, cluster.PurposeOrphan:
	case cluster.PurposeRecreate:
		if w.Verb != cluster.VerbDelete {
			return ""
		}
	default:
		return ""
	}
	if w.Live == nil {
		return "the object is not known"
	}
	if Owner(w.Live) != p.Instance {
		return "it is not owned by this instance (no " + keys.LabelInstance + "=" + p.Instance + " label)"
	}
	return ""
}

// optOut: an object marked recond.dev/reconcile: disabled (in Git or live)
// is never written, deleted or replaced; one marked recond.dev/prune:
// disabled is never deleted; one marked recond.dev/apply: create-only is
// never updated.
func optOut(p Policy, w cluster.Write) string {
	if w.Purpose == cluster.PurposeInventory || w.Purpose == cluster.PurposeSuspension || w.Purpose == cluster.PurposeSeed {
		return ""
	}
	for _, u := range []*unstructured.Unstructured{w.Live, w.Object} {
		if optout.Disabled(u) {
			return "it is marked " + keys.AnnotationReconcile + ": disabled"
		}
	}
	if w.Verb == cluster.VerbDelete && optout.NeverPruned(w.Live) {
		return "it is marked " + keys.AnnotationPrune + ": disabled"
	}
	if w.Purpose == cluster.PurposeApply && w.Live != nil && optout.NeverUpdated(w.Object) {
		return "it is marked " + keys.AnnotationApply + ": create-only and exists"
	}
	return ""
}

// NeverRecreated are the kinds a recreate never deletes: their data would
// be lost with them.
var NeverRecreated = []string{"PersistentVolumeClaim", "PersistentVolume"}

// claims: a recreate never deletes a claim, nor a StatefulSet that deletes
// its claims with it (what it owns transitively is the engine's check:
// Claims).
func claims(p Policy, w cluster.Write) string {
	if w.Purpose != cluster.PurposeRecreate || w.Verb != cluster.VerbDelete || w.Live == nil {
		return ""
	}
	kind := w.Live.GetKind()
	if slices.Contains(NeverRecreated, kind) {
		return "is never applied to a " + kind + " (its data would be lost)"
	}
	if DeletesClaims(w.Live) {
		return "is not applied to a StatefulSet whose persistentVolumeClaimRetentionPolicy deletes its claims with it"
	}
	return ""
}

// DeletesClaims reports whether deleting u deletes PersistentVolumeClaims
// by itself: a StatefulSet with persistentVolumeClaimRetentionPolicy
// whenDeleted: Delete.
func DeletesClaims(u *unstructured.Unstructured) bool {
	if u.GetKind() != "StatefulSet" {
		return false
	}
	v, _, _ := unstructured.NestedString(u.Object, "spec", "persistentVolumeClaimRetentionPolicy", "whenDeleted")
	return v == "Delete"
}

// Chain walks the owners of each object of held (the claims, and the
// objects that delete claims with them) up to maxDepth links, and returns
// the first one whose chain reaches uid, with the chain as text: deleting
// the object with uid (in the foreground) would take it with it. owner
// resolves an owner reference to the live owner (nil: gone, or a UID that
// differs).
func Chain(uid string, held []*unstructured.Unstructured, owner func(of *unstructured.Unstructured, ref OwnerRef) *unstructured.Unstructured) string {
	const maxDepth = 16
	for _, h := range held {
		type step struct {
			obj  *unstructured.Unstructured
			path string
		}
		queue := []step{{h, h.GetKind() + "/" + h.GetName()}}
		seen := map[string]bool{string(h.GetUID()): true}
		for depth := 0; len(queue) > 0 && depth < maxDepth; depth++ {
			var next []step
			for _, s := range queue {
				for _, ref := range s.obj.GetOwnerReferences() {
					if string(ref.UID) == uid {
						return s.path
					}
					if seen[string(ref.UID)] {
						continue
					}
					seen[string(ref.UID)] = true
					if o := owner(s.obj, OwnerRef{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name, UID: string(ref.UID)}); o != nil {
						next = append(next, step{o, s.path + " owned by " + o.GetKind() + "/" + o.GetName()})
					}
				}
			}
			queue = next
		}
	}
	return ""
}

// OwnerRef is an owner reference, as Chain asks the engine to resolve it.
type OwnerRef struct {
	APIVersion, Kind, Name, UID string
}
