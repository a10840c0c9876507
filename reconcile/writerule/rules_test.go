package writerule

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"recond.dev/recond/reconcile/cluster"
	"recond.dev/recond/reconcile/keys"
)

func obj(kind, name string, labels, ann map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": kind, "metadata": map[string]any{"name": name}}}
	if kind == "StatefulSet" {
		u.SetAPIVersion("apps/v1")
	}
	u.SetLabels(labels)
	u.SetAnnotations(ann)
	return u
}

var (
	ownedA   = map[string]string{keys.LabelManagedBy: keys.ManagedByValue, keys.LabelInstance: "a"}
	ownedB   = map[string]string{keys.LabelManagedBy: keys.ManagedByValue, keys.LabelInstance: "b"}
	hookOfA  = map[string]string{keys.LabelHook: "a"}
	hookOfB  = map[string]string{keys.LabelHook: "b"}
	disabled = map[string]string{keys.AnnotationReconcile: "disabled"}
)

func write(p cluster.Purpose, v cluster.Verb, object, live *unstructured.Unstructured) cluster.Write {
	w := cluster.Write{Purpose: p, Verb: v, Object: object, Live: live}
	ref := object
	if ref == nil {
		ref = live
	}
	w.GVK, w.Name = ref.GroupVersionKind(), ref.GetName()
	return w
}

// Each rule refuses what it is for and lets the rest through: the table
// is every purpose against the objects a write can meet.
func TestCheck(t *testing.T) {
	p := Policy{Instance: "a"}
	for _, tc := range []struct {
		name string
		w    cluster.Write
		rule string // "": admitted
	}{
		{"apply a new object", write(cluster.PurposeApply, cluster.VerbApply, obj("ConfigMap", "web", ownedA, nil), nil), ""},
		{"apply over an owned one", write(cluster.PurposeApply, cluster.VerbApply, obj("ConfigMap", "web", ownedA, nil), obj("ConfigMap", "web", ownedA, nil)), ""},
		{"adopt an unowned one", write(cluster.PurposeApply, cluster.VerbApply, obj("ConfigMap", "web", ownedA, nil), obj("ConfigMap", "web", nil, nil)), ""},
		{"apply over another instance's", write(cluster.PurposeApply, cluster.VerbApply, obj("ConfigMap", "web", ownedA, nil), obj("ConfigMap", "web", ownedB, nil)), "ownership"},
		{"apply over another instance's hook", write(cluster.PurposeApply, cluster.VerbApply, obj("ConfigMap", "web", ownedA, nil), obj("ConfigMap", "web", hookOfB, nil)), "ownership"},
		{"apply a reserved name", write(cluster.PurposeApply, cluster.VerbApply, obj("ConfigMap", "recond-inventory-b", ownedA, nil), nil), "reserved-name"},
		{"apply the keys Secret", write(cluster.PurposeApply, cluster.VerbApply, obj("Secret", "recond-sops", ownedA, nil), nil), "reserved-name"},
		{"apply over a disabled live object", write(cluster.PurposeApply, cluster.VerbApply, obj("ConfigMap", "web", ownedA, nil), obj("ConfigMap", "web", ownedA, disabled)), "opt-out"},
		{"update a create-only object", write(cluster.PurposeApply, cluster.VerbApply, obj("ConfigMap", "web", ownedA, map[string]string{keys.AnnotationApply: "create-only"}), obj("ConfigMap", "web", ownedA, nil)), "opt-out"},
		{"create a create-only object", write(cluster.PurposeApply, cluster.VerbApply, obj("ConfigMap", "web", ownedA, map[string]string{keys.AnnotationApply: "create-only"}), nil), ""},
		{"prune an owned object", write(cluster.PurposePrune, cluster.VerbDelete, nil, obj("ConfigMap", "web", ownedA, nil)), ""},
		{"prune an unowned object", write(cluster.PurposePrune, cluster.VerbDelete, nil, obj("ConfigMap", "web", nil, nil)), "owned-only"},
		{"prune a prune-disabled object", write(cluster.PurposePrune, cluster.VerbDelete, nil, obj("ConfigMap", "web", ownedA, map[string]string{keys.AnnotationPrune: "disabled"})), "opt-out"},
		{"orphan an owned object", write(cluster.PurposeOrphan, cluster.VerbPatch, nil, obj("ConfigMap", "web", ownedA, map[string]string{keys.AnnotationPrune: "disabled"})), ""},
		{"hook: create", write(cluster.PurposeHook, cluster.VerbApply, obj("Job", "migrate", hookOfA, nil), nil), ""},
		{"hook: replace an earlier run", write(cluster.PurposeHook, cluster.VerbDelete, nil, obj("Job", "migrate", hookOfA, nil)), ""},
		{"hook: replace an owned object", write(cluster.PurposeHook, cluster.VerbDelete, nil, obj("ConfigMap", "shared", ownedA, nil)), "hook-ownership"},
		{"hook: replace a hand-made object", write(cluster.PurposeHook, cluster.VerbDelete, nil, obj("Secret", "handmade", nil, nil)), "hook-ownership"},
		{"hook: replace another instance's object", write(cluster.PurposeHook, cluster.VerbDelete, nil, obj("ConfigMap", "shared", ownedB, nil)), "ownership"},
		{"hook: apply over a hand-made object", write(cluster.PurposeHook, cluster.VerbApply, obj("ConfigMap", "x", hookOfA, nil), obj("ConfigMap", "x", nil, nil)), "hook-ownership"},
		{"hook: without its label", write(cluster.PurposeHook, cluster.VerbApply, obj("ConfigMap", "x", nil, nil), nil), "hook-ownership"},
		{"hook: a reserved name", write(cluster.PurposeHook, cluster.VerbApply, obj("Secret", "recond-seed-a", hookOfA, nil), nil), "reserved-name"},
		{"recreate an owned Deployment", write(cluster.PurposeRecreate, cluster.VerbDelete, nil, obj("Deployment", "web", ownedA, nil)), ""},
		{"recreate a claim", write(cluster.PurposeRecreate, cluster.VerbDelete, nil, obj("PersistentVolumeClaim", "data", ownedA, nil)), "claims"},
		{"recreate an unowned object", write(cluster.PurposeRecreate, cluster.VerbDelete, nil, obj("Deployment", "web", nil, nil)), "owned-only"},
		{"inventory", write(cluster.PurposeInventory, cluster.VerbApply, obj("ConfigMap", "recond-inventory-a", nil, nil), nil), ""},
		{"inventory of another instance", write(cluster.PurposeInventory, cluster.VerbApply, obj("ConfigMap", "recond-inventory-b", nil, nil), nil), "reserved-name"},
		{"inventory on another object", write(cluster.PurposeInventory, cluster.VerbApply, obj("ConfigMap", "web", nil, nil), nil), "reserved-name"},
		{"suspension", write(cluster.PurposeSuspension, cluster.VerbPatch, nil, obj("ConfigMap", "recond-inventory-a", nil, nil)), ""},
		{"seed", write(cluster.PurposeSeed, cluster.VerbCreate, obj("Secret", "recond-seed-a", nil, nil), nil), ""},
		{"seed of another name", write(cluster.PurposeSeed, cluster.VerbCreate, obj("Secret", "recond-seed-b", nil, nil), nil), "reserved-name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(p, tc.w)
			got := ""
			if r, ok := err.(*Refusal); ok {
				got = r.Rule
			} else if err != nil {
				t.Fatalf("error %v is not a *Refusal", err)
			}
			if got != tc.rule {
				t.Errorf("refused by %q (%v), want %q", got, err, tc.rule)
			}
		})
	}
	// A StatefulSet that deletes its claims is never recreated.
	sts := obj("StatefulSet", "db", ownedA, nil)
	_ = unstructured.SetNestedField(sts.Object, "Delete", "spec", "persistentVolumeClaimRetentionPolicy", "whenDeleted")
	if err := Check(p, write(cluster.PurposeRecreate, cluster.VerbDelete, nil, sts)); err == nil {
		t.Error("a StatefulSet that deletes its claims was admitted for a recreate")
	}
}

// Chain follows owners through any number of links, and says the chain.
func TestChain(t *testing.T) {
	byUID := map[string]*unstructured.Unstructured{}
	mk := func(kind, name, uid string, owner *unstructured.Unstructured) *unstructured.Unstructured {
		u := obj(kind, name, nil, nil)
		u.SetUID(types.UID(uid))
		if owner != nil {
			u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: owner.GetAPIVersion(), Kind: owner.GetKind(), Name: owner.GetName(), UID: owner.GetUID()}})
		}
		byUID[uid] = u
		return u
	}
	cr := mk("Database", "main", "u-cr", nil)
	cm := mk("ConfigMap", "mid", "u-cm", cr)
	claim := mk("PersistentVolumeClaim", "data", "u-pvc", cm)
	other := mk("PersistentVolumeClaim", "free", "u-free", nil)
	owner := func(_ *unstructured.Unstructured, ref OwnerRef) *unstructured.Unstructured { return byUID[ref.UID] }
	if got, want := Chain("u-cr", []*unstructured.Unstructured{other, claim}, owner), "PersistentVolumeClaim/data owned by ConfigMap/mid"; got != want {
		t.Errorf("Chain = %q, want %q", got, want)
	}
	if got := Chain("u-other", []*unstructured.Unstructured{other, claim}, owner); got != "" {
		t.Errorf("Chain for an unrelated owner = %q, want none", got)
	}
	// A cycle of owners ends.
	a := mk("ConfigMap", "a", "u-a", nil)
	b := mk("ConfigMap", "b", "u-b", a)
	a.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "b", UID: b.GetUID()}})
	if got := Chain("u-nobody", []*unstructured.Unstructured{a}, owner); got != "" {
		t.Errorf("Chain through a cycle = %q", got)
	}
}
