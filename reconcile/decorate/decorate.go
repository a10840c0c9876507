package decorate

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"recond.dev/recond/internal/redact"
	"recond.dev/recond/reconcile/diff"
	"recond.dev/recond/reconcile/failure"
	"recond.dev/recond/reconcile/keys"
)

// MinNameSecret is the length from which a decrypted value may not be part
// of an object's name.
const MinNameSecret = 8

// Identity is the error of an object whose kind, name or namespace holds a value
// recond decrypted: names are shown everywhere (logs, the page, Events,
// the inventory), so such an object is refused, and the error does not
// quote it.
func Identity(file string, u *unstructured.Unstructured, values []string) error {
	if len(values) == 0 {
		return nil
	}
	for _, v := range []string{u.GetKind(), u.GetAPIVersion(), u.GetName(), u.GetNamespace(), u.GetGenerateName()} {
		if slices.ContainsFunc(values, func(s string) bool { return strings.Contains(v, s) }) {
			return failure.Invalidf("%s: an object's kind, name or namespace holds a value recond decrypted (SOPS): "+
				"refused, as names are shown everywhere; keep decrypted values in a Secret's data", file)
		}
	}
	return nil
}

// ReservedFor says what recond keeps a name for: the reserved prefix p it
// starts with and which instance's object it is, or the reserved name p
// it is.
func ReservedFor(p, name string) string {
	instance := strings.TrimPrefix(name, p)
	switch p {
	case keys.InventoryPrefix:
		return fmt.Sprintf("names starting with %q are the instances' inventories (ConfigMaps); %s is instance %q's", p, name, instance)
	case keys.LeasePrefix:
		return fmt.Sprintf("names starting with %q are the instances' Leases; %s is instance %q's", p, name, instance)
	case keys.SeedPrefix:
		return fmt.Sprintf("names starting with %q are the instances' seeds (Secrets), from which a chart's random functions "+
			"(randAlphaNum, genPrivateKey, ...) draw; %s is instance %q's seed", p, name, instance)
	case name:
		return fmt.Sprintf("%s is the Secret that holds the SOPS age keys", name)
	}
	return fmt.Sprintf("names starting with %q are recond's own objects", p)
}

// Masked writes on every object that holds a decrypted value the
// fields that hold one (diff.MaskedFieldsAnnotation): a later process
// that no longer knows the value still masks those fields of the live
// object.
func Masked(s *redact.Set, objs []*unstructured.Unstructured) {
	if s == nil {
		return
	}
	for _, obj := range objs {
		if f := diff.Fields(s, obj.Object); f != nil {
			ann := obj.GetAnnotations()
			if ann == nil {
				ann = map[string]string{}
			}
			ann[diff.MaskedFieldsAnnotation] = diff.MaskedFields(f)
			obj.SetAnnotations(ann)
		}
	}
}

// FirstOfEachKind returns the first object of each kind (group, version
// and kind) in desired, in order.
func FirstOfEachKind(desired []*unstructured.Unstructured) []*unstructured.Unstructured {
	seen := map[schema.GroupVersionKind]bool{}
	var out []*unstructured.Unstructured
	for _, d := range desired {
		if gvk := d.GroupVersionKind(); !seen[gvk] {
			seen[gvk] = true
			out = append(out, d)
		}
	}
	return out
}

// Hook labels a hook object as this instance's hook (not owned:
// never diffed or pruned) and adds the provenance annotations.
func Hook(obj *unstructured.Unstructured, instance, revision, source string) {
	Object(obj, instance, revision, source)
	l := obj.GetLabels()
	delete(l, keys.LabelManagedBy)
	delete(l, keys.LabelInstance)
	l[keys.LabelHook] = instance
	obj.SetLabels(l)
}

// Object adds the ownership labels and the provenance annotations.
func Object(obj *unstructured.Unstructured, instance, revision, source string) {
	l := obj.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	l[keys.LabelManagedBy] = keys.ManagedByValue
	l[keys.LabelInstance] = instance
	obj.SetLabels(l)
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[keys.AnnotationRevision] = revision
	a[keys.AnnotationSource] = source
	obj.SetAnnotations(a)
	// Fields the server owns must never be applied.
	for _, f := range []string{"resourceVersion", "uid", "creationTimestamp", "generation", "managedFields", "selfLink"} {
		unstructured.RemoveNestedField(obj.Object, "metadata", f)
	}
	unstructured.RemoveNestedField(obj.Object, "status")
}
