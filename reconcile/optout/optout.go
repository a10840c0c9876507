package optout

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"recond.dev/recond/reconcile/keys"
)

// Reason says why the loop left an object, or part of one, alone. The
// values are a contract: recond_skipped_resources{reason} uses them.
type Reason string

// Every reason an object is skipped.
const (
	ReconcileDisabled Reason = "reconcile_disabled"
	CreateOnly        Reason = "create_only"
	PruneDisabled     Reason = "prune_disabled"
	IgnoreFields      Reason = "ignore_fields"
)

// Reasons lists every Reason, so that labelled series can be
// pre-initialised.
var Reasons = []Reason{ReconcileDisabled, CreateOnly, PruneDisabled, IgnoreFields}

// Skip is one object an opt-out held back at a tick: all of it
// (reconcile_disabled; create_only: an update not made; prune_disabled: a
// delete not made, the object orphaned instead) or some of its fields
// (ignore_fields).
type Skip struct {
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Reason Reason `json:"reason"`
	// Fields are the ignored fields' pointers (ignore_fields).
	Fields []string `json:"fields,omitempty"`
}

// SkipOf is the Skip of object u for reason why.
func SkipOf(u *unstructured.Unstructured, why Reason, fields []string) Skip {
	return Skip{Kind: u.GetKind(), Name: u.GetName(), Reason: why, Fields: fields}
}

func (s Skip) String() string {
	out := s.Kind + "/" + s.Name + " (" + string(s.Reason)
	if len(s.Fields) > 0 {
		out += ": " + strings.Join(s.Fields, ",")
	}
	return out + ")"
}

// Annotation returns an annotation of u without copying its annotations
// (GetAnnotations copies the map: a converged tick must not, per object).
func Annotation(u *unstructured.Unstructured, key string) (string, bool) {
	if u == nil {
		return "", false
	}
	m, ok := u.Object["metadata"].(map[string]any)
	if !ok {
		return "", false
	}
	ann, ok := m["annotations"].(map[string]any)
	if !ok {
		return "", false
	}
	v, ok := ann[key].(string)
	return v, ok
}

// Disabled reports whether u says recond.dev/reconcile: disabled: never
// written, healed, replaced nor pruned.
func Disabled(u *unstructured.Unstructured) bool {
	v, _ := Annotation(u, keys.AnnotationReconcile)
	return v == "disabled"
}

// NeverPruned reports whether u says recond.dev/prune: disabled: never
// deleted (orphaned when it leaves Git).
func NeverPruned(u *unstructured.Unstructured) bool {
	v, _ := Annotation(u, keys.AnnotationPrune)
	return v == "disabled"
}

// NeverUpdated reports whether u says recond.dev/apply: create-only: created
// when missing, never updated.
func NeverUpdated(u *unstructured.Unstructured) bool {
	v, _ := Annotation(u, keys.AnnotationApply)
	return v == "create-only"
}

// Check checks the opt-out annotations of a desired object and applies
// recond.dev/ignore-fields to it: the fields are removed (neither compared
// nor sent). It returns the ignored pointers. A value it does not know is
// an error naming the annotation: an opt-out misspelt is not silently
// ignored.
func Check(obj *unstructured.Unstructured) ([]string, error) {
	ann := obj.GetAnnotations()
	for _, c := range []struct{ key, want string }{
		{keys.AnnotationReconcile, "disabled"},
		{keys.AnnotationApply, "create-only"},
		{keys.AnnotationPrune, "disabled"},
		{keys.AnnotationForce, "recreate"},
	} {
		if v, ok := ann[c.key]; ok && v != c.want && v != "" {
			return nil, fmt.Errorf("annotation %s: %q is not a value recond knows (want %q)", c.key, v, c.want)
		}
	}
	v, ok := ann[keys.AnnotationIgnoreFields]
	if !ok {
		return nil, nil
	}
	return ignoreFields(obj, v)
}

// OrphanPatch removes recond's ownership labels and provenance
// annotations from an object (recond.dev/prune: disabled that left Git):
// it is no longer recond's, and never pruned.
var OrphanPatch = []byte(`{"metadata":{"labels":{"` + keys.LabelManagedBy + `":null,"` + keys.LabelInstance + `":null},"annotations":{"` +
	keys.AnnotationRevision + `":null,"` + keys.AnnotationSource + `":null}}}`)
