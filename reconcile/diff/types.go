package diff

import (
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// FieldType is what the API server's schema says a scalar field holds, as
// far as comparing two values of it goes.
type FieldType uint8

// The field types a FieldTypes can report.
const (
	// FieldUnknown means there is no schema for the field (no FieldTypes,
	// a kind the server publishes no schema for, or a field under
	// x-kubernetes-preserve-unknown-fields): the rules by field name apply.
	FieldUnknown FieldType = iota
	// FieldPlain is any other field the schema describes: numbers compare
	// numerically, anything else exactly.
	FieldPlain
	// FieldQuantity is a resource.Quantity, which the server canonicalises:
	// "0.5" == "500m" == 0.5 and "30k" == "30000".
	FieldQuantity
	// FieldIntOrString holds an integer or a string and the server keeps
	// which: 80 and "80" differ, "http" and "http" do not.
	FieldIntOrString
	// FieldDuration is a duration string: "1m" == "60s".
	FieldDuration
)

// String names the type for messages.
func (t FieldType) String() string {
	switch t {
	case FieldPlain:
		return "plain"
	case FieldQuantity:
		return "quantity"
	case FieldIntOrString:
		return "int-or-string"
	case FieldDuration:
		return "duration"
	}
	return "unknown"
}

// Item is the path element that stands for an item of a list in the path a
// FieldTypes is asked about: spec.metrics[0].external.target.averageValue is
// {"spec", "metrics", Item, "external", "target", "averageValue"}. Map keys,
// whether they name a property or a key under additionalProperties
// (spec.limits[0].default.cpu), are path elements as they are.
const Item = "[]"

// FieldTypes tells the type of a field from the API server's schema.
type FieldTypes interface {
	// TypeOf returns the type of the field at path in objects of kind gvk,
	// FieldUnknown when the schema does not say. It must not keep path,
	// which the caller reuses, and must do no I/O: it is called for every
	// scalar of every object.
	TypeOf(gvk schema.GroupVersionKind, path []string) FieldType
}

// quantityParents are map keys whose values are resource quantities
// (resources.limits, resources.requests, ResourceQuota spec.hard); the rule
// for objects without a schema.
var quantityParents = map[string]bool{"limits": true, "requests": true, "hard": true}

// quantityKeys are fields holding a quantity wherever they appear, without a
// schema.
var quantityKeys = map[string]bool{"sizeLimit": true, "storage": true}

// byName is the type of the scalar at key, inside the map found under
// parent, when no schema says: a quantity for the well-known names.
func byName(parent, key string) FieldType {
	if quantityParents[parent] || quantityKeys[key] {
		return FieldQuantity
	}
	return FieldPlain
}

// typeOf is the type of the scalar the walker stands on: the schema's answer
// when it has one, else the rule by name.
func (w *walker) typeOf(parent, key string) FieldType {
	if w.types != nil {
		if t := w.types.TypeOf(w.gvk, w.stack); t != FieldUnknown {
			return t
		}
	}
	return byName(parent, key)
}

// push descends the walker's schema path by one element; pop undoes it.
func (w *walker) push(elem string) { w.stack = append(w.stack, elem) }
func (w *walker) pop()             { w.stack = w.stack[:len(w.stack)-1] }

// durationEqual compares two durations given as strings by value; ok is
// false when either does not parse.
func durationEqual(a, b any) (equal, ok bool) {
	sa, aok := a.(string)
	sb, bok := b.(string)
	if !aok || !bok {
		return false, false
	}
	da, err := time.ParseDuration(sa)
	if err != nil {
		return false, false
	}
	db, err := time.ParseDuration(sb)
	if err != nil {
		return false, false
	}
	return da == db, true
}
