package render

import (
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// exactInt reports whether the integer literal s fits in an int64, the
// only integer type an unstructured object holds. ok is false when s is
// not an integer literal this check understands.
func exactInt(s string) (exact, ok bool) {
	var i big.Int
	if _, ok := i.SetString(s, 0); !ok {
		return false, false
	}
	return i.IsInt64(), true
}

// exactFloat reports whether the float literal s keeps its value as a
// float64: its decimal value equals that of the shortest formatting of the
// nearest float64. ok is false for literals this check does not judge
// (.inf, .nan and forms big.Rat does not read).
func exactFloat(s string) (exact, ok bool) {
	s = strings.ReplaceAll(s, "_", "")
	var lit big.Rat
	if _, ok := lit.SetString(s); !ok {
		return false, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return false, true // out of range
	}
	var short big.Rat
	if _, ok := short.SetString(strconv.FormatFloat(f, 'g', -1, 64)); !ok {
		return false, true
	}
	return lit.Cmp(&short) == 0, true
}

// numberError is the error for an inexact number at field of object. When
// hide is set (the number is a Secret's value, or in a file that is secret
// as a whole) the literal is not quoted: the field names it.
func numberError(file, object, field, lit, what string, hide bool) error {
	if hide {
		return &ManifestError{File: file, Object: object,
			Err: SecretErrorf("%s: number (a secret value, not shown) is not exactly representable (%s); quote it to make it a string", field, what)}
	}
	return &ManifestError{File: file, Object: object,
		Err: fmt.Errorf("%s: number %s is not exactly representable (%s)", field, lit, what)}
}

// secretHider returns whether a number at a field of an object of kind is
// a secret value that errors must not quote: any field in a file that is
// secret as a whole (secretFile), and a Secret's data, stringData and
// annotations (which hold kubectl's copy of the whole object).
func secretHider(secretFile bool, kind string) func(field string) bool {
	return func(field string) bool {
		if secretFile {
			return true
		}
		if kind != "Secret" {
			return false
		}
		for _, f := range []string{"data", "stringData", "metadata.annotations"} {
			if field == f || strings.HasPrefix(field, f+".") || strings.HasPrefix(field, f+"[") {
				return true
			}
		}
		return false
	}
}

// checkNumbers refuses any number in the YAML document doc that would not
// survive decoding exactly. A list's items are reported as objects of
// their own. Only objects (with apiVersion and kind) are checked: other
// YAML that kustomize reads (generator data) is not decoded as numbers.
// secretFile is set for a file that is secret as a whole (its numbers are
// never quoted).
func checkNumbers(file string, doc *yaml.Node, secretFile bool) error {
	root := docRoot(doc)
	if root == nil || mapValue(root, "apiVersion") == nil || mapValue(root, "kind") == nil {
		return nil
	}
	if items := mapValue(root, "items"); items != nil && items.Kind == yaml.SequenceNode && strings.HasSuffix(scalar(mapValue(root, "kind")), "List") {
		for _, it := range items.Content {
			if err := walkNumbers(file, objectRef(it), "", it, secretHider(secretFile, scalar(mapValue(it, "kind")))); err != nil {
				return err
			}
		}
		return nil
	}
	return walkNumbers(file, objectRef(root), "", root, secretHider(secretFile, scalar(mapValue(root, "kind"))))
}

func walkNumbers(file, object, field string, n *yaml.Node, hide func(string) bool) error {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			f := k
			if field != "" {
				f = field + "." + k
			}
			if err := walkNumbers(file, object, f, n.Content[i+1], hide); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		for i, ch := range n.Content {
			if err := walkNumbers(file, object, fmt.Sprintf("%s[%d]", field, i), ch, hide); err != nil {
				return err
			}
		}
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!int":
			if exact, ok := exactInt(n.Value); ok && !exact {
				return numberError(file, object, field, n.Value, "integer outside int64", hide(field))
			}
		case "!!float":
			if exact, ok := exactFloat(n.Value); ok && !exact {
				what := "more digits than a float64 holds"
				if !strings.ContainsAny(n.Value, ".eE") {
					what = "integer outside int64" // yaml.v3 makes a float of it
				}
				return numberError(file, object, field, n.Value, what, hide(field))
			}
		}
	}
	return nil
}

// checkJSONNumbers is checkNumbers for a JSON value decoded with UseNumber
// (v, at field of object); secretFile is as for checkNumbers.
func checkJSONNumbers(file, object, field string, v any, secretFile bool) error {
	m, _ := v.(map[string]any)
	kind, _ := m["kind"].(string)
	return walkJSONNumbers(file, object, field, v, secretFile, secretHider(secretFile, kind))
}

func walkJSONNumbers(file, object, field string, v any, secretFile bool, hide func(string) bool) error {
	switch v := v.(type) {
	case map[string]any:
		if items, ok := v["items"].([]any); ok && field == "" {
			if k, _ := v["kind"].(string); strings.HasSuffix(k, "List") {
				for _, it := range items {
					m, _ := it.(map[string]any)
					if err := checkJSONNumbers(file, jsonRef(m), "", it, secretFile); err != nil {
						return err
					}
				}
				return nil
			}
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			f := k
			if field != "" {
				f = field + "." + k
			}
			if err := walkJSONNumbers(file, object, f, v[k], secretFile, hide); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range v {
			if err := walkJSONNumbers(file, object, fmt.Sprintf("%s[%d]", field, i), e, secretFile, hide); err != nil {
				return err
			}
		}
	case json.Number:
		s := string(v)
		if strings.ContainsAny(s, ".eE") {
			if exact, ok := exactFloat(s); ok && !exact {
				return numberError(file, object, field, s, "more digits than a float64 holds", hide(field))
			}
		} else if exact, ok := exactInt(s); ok && !exact {
			return numberError(file, object, field, s, "integer outside int64", hide(field))
		}
	}
	return nil
}

// checkYAMLSecretKeys refuses a Secret in the YAML document doc (or in its
// list's items) whose data or stringData holds a key the API would refuse
// (see checkSecretKeys).
func checkYAMLSecretKeys(file string, doc *yaml.Node) error {
	root := docRoot(doc)
	if root == nil {
		return nil
	}
	objs := []*yaml.Node{root}
	if items := mapValue(root, "items"); items != nil && items.Kind == yaml.SequenceNode && strings.HasSuffix(scalar(mapValue(root, "kind")), "List") {
		objs = items.Content
	}
	for _, o := range objs {
		if scalar(mapValue(o, "kind")) != "Secret" || mapValue(o, "apiVersion") == nil {
			continue
		}
		if err := checkSecretKeys(file, objectRef(o), yamlSecretKeys(o)); err != nil {
			return err
		}
	}
	return nil
}

// checkJSONSecretKeys is checkYAMLSecretKeys for a decoded JSON object.
func checkJSONSecretKeys(file string, obj map[string]any) error {
	objs := []map[string]any{obj}
	if k, _ := obj["kind"].(string); strings.HasSuffix(k, "List") {
		items, _ := obj["items"].([]any)
		objs = objs[:0]
		for _, it := range items {
			if m, ok := it.(map[string]any); ok {
				objs = append(objs, m)
			}
		}
	}
	for _, o := range objs {
		if k, _ := o["kind"].(string); k != "Secret" || o["apiVersion"] == nil {
			continue
		}
		if err := checkSecretKeys(file, jsonRef(o), jsonSecretKeys(o)); err != nil {
			return err
		}
	}
	return nil
}

// docRoot is the top node of a document, or nil when it is empty.
func docRoot(doc *yaml.Node) *yaml.Node {
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) == 0 {
			return nil
		}
		return doc.Content[0]
	}
	return doc
}

// mapValue is the value of key in the mapping n, or nil.
func mapValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

func scalar(n *yaml.Node) string {
	if n == nil || n.Kind != yaml.ScalarNode {
		return ""
	}
	return n.Value
}

// objectRef is "Kind/name" of the object n, or as much of it as is known.
func objectRef(n *yaml.Node) string {
	return Ref(scalar(mapValue(n, "kind")), scalar(mapValue(mapValue(n, "metadata"), "name")))
}

func jsonRef(m map[string]any) string {
	kind, _ := m["kind"].(string)
	md, _ := m["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	return Ref(kind, name)
}

// Ref is "Kind/name" of an object, or as much of it as is known.
func Ref(kind, name string) string {
	switch {
	case kind == "":
		return name
	case name == "":
		return kind
	}
	return kind + "/" + name
}
