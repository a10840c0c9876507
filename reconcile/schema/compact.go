package schema

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"recond.dev/recond/reconcile/diff"
)

// field is a parsed document reduced to the answers typeOf gives: what a
// field at this place is (typ), and the places below it. References are
// followed once, when the document is compacted, so that the document's
// definitions, their references, formats and patterns need not be kept:
// a group-version's schemas shrink to one field per place a kind can
// reach, and every place that has nothing below it shares one leaf per
// type.
type field struct {
	typ diff.FieldType
	sub *fields // nil: nothing described below
}

// fields are the places below a field: its properties, its list items, and
// the values of keys no property names. Fields that refer to the same
// definition share them.
type fields struct {
	props map[string]*field
	items *field
	other *field // additionalProperties
}

// leaves are the fields nothing is described below, one per type, shared.
var leaves = func() map[diff.FieldType]*field {
	m := map[diff.FieldType]*field{}
	for _, t := range []diff.FieldType{diff.FieldUnknown, diff.FieldPlain, diff.FieldQuantity, diff.FieldIntOrString, diff.FieldDuration} {
		m[t] = &field{typ: t}
	}
	return m
}()

// compact reduces d to the fields of its kinds. Each kind's root answers
// as d.typeOf does from d.kinds[kind].
func compact(d *document) map[schema.GroupVersionKind]*field {
	c := compactor{d: d, fields: map[*node]*field{}, subs: map[*node]*fields{}}
	out := make(map[schema.GroupVersionKind]*field, len(d.kinds))
	for gvk, root := range d.kinds {
		out[gvk] = c.field(root)
	}
	return out
}

type compactor struct {
	d      *document
	fields map[*node]*field  // by the node of the place
	subs   map[*node]*fields // by the node resolve finds
}

// field is n's place: typed as classify types it, with the places below
// resolve(n) as typeOf walks them.
func (c *compactor) field(n *node) *field {
	if f, ok := c.fields[n]; ok {
		return f
	}
	typ := c.d.classify(n)
	r := c.d.resolve(n)
	if r == nil || (len(r.Properties) == 0 && r.Items == nil && r.AdditionalProperties == nil) {
		c.fields[n] = leaves[typ]
		return leaves[typ]
	}
	f := &field{typ: typ}
	c.fields[n] = f // before the places below: definitions can loop
	f.sub = c.sub(r)
	return f
}

func (c *compactor) sub(r *node) *fields {
	if s, ok := c.subs[r]; ok {
		return s
	}
	s := &fields{}
	c.subs[r] = s
	if len(r.Properties) > 0 {
		s.props = make(map[string]*field, len(r.Properties))
		for k, p := range r.Properties {
			if p == nil {
				s.props[k] = nil // described as nothing: unknown
				continue
			}
			s.props[k] = c.field(p)
		}
	}
	if r.Items != nil {
		s.items = c.field(r.Items)
	}
	if r.AdditionalProperties != nil {
		s.other = c.field(r.AdditionalProperties)
	}
	return s
}

// typeOf walks path (diff.Item for a list item) from f.
func (f *field) typeOf(path []string) diff.FieldType {
	for _, p := range path {
		if f.sub == nil {
			return diff.FieldUnknown
		}
		var next *field
		if p == diff.Item {
			next = f.sub.items
		} else if c, ok := f.sub.props[p]; ok {
			next = c
		} else {
			next = f.sub.other
		}
		if next == nil {
			return diff.FieldUnknown
		}
		f = next
	}
	return f.typ
}
