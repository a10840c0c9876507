package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"recond.dev/recond/reconcile/diff"
)

// Definitions whose fields the diff compares by their own rules.
const (
	refPrefix   = "#/components/schemas/"
	quantityRef = "io.k8s.apimachinery.pkg.api.resource.Quantity"
	intStrRef   = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
	durationRef = "io.k8s.apimachinery.pkg.apis.meta.v1.Duration"
)

// QuantityPattern is the pattern controller-gen puts on a resource.Quantity
// field of a custom resource, which it declares an int-or-string: such a
// field is a quantity.
const QuantityPattern = `^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`

// maxHops bounds the references followed for one path element, so that a
// document whose references loop cannot hang a comparison.
const maxHops = 32

// document is one group-version's OpenAPI v3 document, reduced to what
// typing fields needs.
type document struct {
	schemas map[string]*node
	kinds   map[schema.GroupVersionKind]*node
}

// node is a schema object. Descriptions, defaults and validations other
// than the quantity pattern are not kept.
type node struct {
	Ref                  string           `json:"$ref"`
	AllOf                []*node          `json:"allOf"`
	Format               string           `json:"format"`
	Pattern              string           `json:"pattern"`
	Properties           map[string]*node `json:"properties"`
	AdditionalProperties *node            `json:"-"`
	Items                *node            `json:"-"`
	IntOrString          bool             `json:"x-kubernetes-int-or-string"`
	GVK                  []struct {
		Group   string `json:"group"`
		Version string `json:"version"`
		Kind    string `json:"kind"`
	} `json:"x-kubernetes-group-version-kind"`
}

// UnmarshalJSON reads a schema object; additionalProperties may be a
// boolean and items a list, both of which type nothing.
func (n *node) UnmarshalJSON(b []byte) error {
	type plain node
	var aux struct {
		*plain
		AdditionalProperties json.RawMessage `json:"additionalProperties"`
		Items                json.RawMessage `json:"items"`
	}
	aux.plain = (*plain)(n)
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	var err error
	if n.AdditionalProperties, err = objectOrNil(aux.AdditionalProperties); err != nil {
		return fmt.Errorf("additionalProperties: %w", err)
	}
	if n.Items, err = objectOrNil(aux.Items); err != nil {
		return fmt.Errorf("items: %w", err)
	}
	return nil
}

func objectOrNil(raw json.RawMessage) (*node, error) {
	if raw = bytes.TrimSpace(raw); len(raw) == 0 || raw[0] != '{' {
		return nil, nil
	}
	n := &node{}
	if err := json.Unmarshal(raw, n); err != nil {
		return nil, err
	}
	return n, nil
}

// parse reads an OpenAPI v3 document and indexes its definitions by the
// kinds they carry in x-kubernetes-group-version-kind.
func parse(b []byte) (*document, error) {
	var raw struct {
		Components struct {
			Schemas map[string]*node `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, err
	}
	d := &document{schemas: raw.Components.Schemas, kinds: map[schema.GroupVersionKind]*node{}}
	for _, n := range d.schemas {
		if n == nil {
			continue
		}
		for _, g := range n.GVK {
			d.kinds[schema.GroupVersionKind{Group: g.Group, Version: g.Version, Kind: g.Kind}] = n
		}
	}
	return d, nil
}

// typeOf walks path (diff.Item for a list item) from root and types the
// field it ends at.
func (d *document) typeOf(root *node, path []string) diff.FieldType {
	n := root
	for _, p := range path {
		n = d.resolve(n)
		if n == nil {
			return diff.FieldUnknown
		}
		var next *node
		if p == diff.Item {
			next = n.Items
		} else if c, ok := n.Properties[p]; ok {
			next = c
		} else {
			next = n.AdditionalProperties
		}
		if next == nil {
			// Not described here: x-kubernetes-preserve-unknown-fields,
			// or a field the server would drop.
			return diff.FieldUnknown
		}
		n = next
	}
	return d.classify(n)
}

// resolve follows references (a $ref, or allOf with a single member, the
// form properties refer to definitions in) to the schema that describes n.
func (d *document) resolve(n *node) *node {
	for range maxHops {
		switch {
		case n == nil:
			return nil
		case n.Ref != "":
			n = d.schemas[strings.TrimPrefix(n.Ref, refPrefix)]
		case len(n.AllOf) == 1 && n.Properties == nil && n.Items == nil && n.AdditionalProperties == nil:
			n = n.AllOf[0]
		default:
			return n
		}
	}
	return nil
}

// classify types the field n describes, looking through its references.
func (d *document) classify(n *node) diff.FieldType {
	for range maxHops {
		if n == nil {
			return diff.FieldUnknown
		}
		switch {
		case n.IntOrString && n.Pattern == QuantityPattern:
			return diff.FieldQuantity
		case n.IntOrString || n.Format == "int-or-string":
			return diff.FieldIntOrString
		case n.Format == "duration":
			return diff.FieldDuration
		}
		switch strings.TrimPrefix(n.Ref, refPrefix) {
		case quantityRef:
			return diff.FieldQuantity
		case intStrRef:
			return diff.FieldIntOrString
		case durationRef:
			return diff.FieldDuration
		}
		switch {
		case n.Ref != "":
			n = d.schemas[strings.TrimPrefix(n.Ref, refPrefix)]
		case len(n.AllOf) == 1:
			n = n.AllOf[0]
		default:
			return diff.FieldPlain
		}
	}
	return diff.FieldUnknown
}
