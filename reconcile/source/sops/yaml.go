package sops

import (
	"bytes"
	"errors"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"filippo.io/age"
	yaml "go.yaml.in/yaml/v3"
)

// yamlDocuments parses every document of data, without resolving aliases.
func yamlDocuments(data []byte) ([]*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*yaml.Node
	for {
		var d yaml.Node
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		docs = append(docs, &d)
	}
}

// yamlEncrypted reports whether one of data's documents is a mapping with
// a "sops" mapping holding "mac" and "lastmodified".
func yamlEncrypted(data []byte) bool {
	docs, err := yamlDocuments(data)
	if err != nil {
		return false
	}
	for _, d := range docs {
		if len(d.Content) != 1 || d.Content[0].Kind != yaml.MappingNode {
			continue
		}
		m := d.Content[0]
		for i := 0; i+1 < len(m.Content); i += 2 {
			if k, v := m.Content[i], m.Content[i+1]; k.Kind == yaml.ScalarNode && k.Value == sopsKey && v.Kind == yaml.MappingNode {
				var mac, lm bool
				for j := 0; j+1 < len(v.Content); j += 2 {
					mac = mac || v.Content[j].Value == "mac"
					lm = lm || v.Content[j].Value == "lastmodified"
				}
				if mac && lm {
					return true
				}
			}
		}
	}
	return false
}

// yamlPlain refuses what sops never writes and this package does not
// read: anchors and aliases (whose expansion is unbounded).
func yamlPlain(n *yaml.Node, depth int) error {
	if depth > maxDepth+2 {
		return invalidf("mappings and lists nest more than %d deep", maxDepth)
	}
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		return invalidf("the file holds a YAML anchor or alias, which sops does not write (line %d)", n.Line)
	}
	for _, c := range n.Content {
		if err := yamlPlain(c, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// commentItems are a YAML comment's lines as comment entries (sops: the
// text after the '#').
func commentItems(items []item, text string) []item {
	if text == "" {
		return items
	}
	for line := range strings.SplitSeq(text, "\n") {
		if line != "" {
			items = append(items, item{isComment: true, comment: line[1:]})
		}
	}
	return items
}

// yamlMap adds yn's entries (a document or a mapping) to m, with comments
// where sops's YAML store puts them. handled: yn's own comments were added
// by the caller.
func yamlMap(m *node, yn *yaml.Node, handled bool, depth int) error {
	if depth > maxDepth {
		return invalidf("mappings and lists nest more than %d deep", maxDepth)
	}
	if !handled {
		m.items = commentItems(m.items, yn.HeadComment)
		m.items = commentItems(m.items, yn.LineComment)
	}
	switch yn.Kind {
	case yaml.DocumentNode:
		for _, c := range yn.Content {
			if err := yamlMap(m, c, false, depth); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		return invalidf("a YAML document that is a list is not a sops file (line %d)", yn.Line)
	case yaml.MappingNode:
		m.yn = yn
		seen := map[string]bool{}
		for i := 0; i+1 < len(yn.Content); i += 2 {
			k, v := yn.Content[i], yn.Content[i+1]
			m.items = commentItems(m.items, k.HeadComment)
			m.items = commentItems(m.items, k.LineComment)
			scalar := v.Kind == yaml.ScalarNode
			if scalar {
				m.items = commentItems(m.items, v.HeadComment)
				m.items = commentItems(m.items, v.LineComment)
			}
			if k.ShortTag() == "!!merge" {
				return invalidf("the file holds a YAML merge key, which sops does not write (line %d)", k.Line)
			}
			var kv any
			if k.Kind != yaml.ScalarNode || k.Decode(&kv) != nil {
				return invalidf("a mapping key at line %d is not a string", k.Line)
			}
			key, ok := kv.(string)
			if !ok {
				return invalidf("a mapping key at line %d is not a string", k.Line)
			}
			if seen[key] {
				return invalidf("the key %s appears twice in a mapping (line %d)", strconv.Quote(safeText(key)), k.Line)
			}
			seen[key] = true
			val, err := yamlValue(v, scalar, depth+1)
			if err != nil {
				return err
			}
			m.items = append(m.items, item{key: key, keyNode: k, value: val})
			if scalar {
				m.items = commentItems(m.items, v.FootComment)
			}
			m.items = commentItems(m.items, k.FootComment)
		}
	case yaml.ScalarNode:
		if yn.ShortTag() == "!!null" {
			return nil // an empty document
		}
		return invalidf("a YAML document that is a scalar is not a sops file (line %d)", yn.Line)
	default:
		return invalidf("unexpected YAML node at line %d", yn.Line)
	}
	if !handled {
		m.items = commentItems(m.items, yn.FootComment)
	}
	return nil
}

// yamlValue reads a value; handled: its comments were added by the caller.
func yamlValue(yn *yaml.Node, handled bool, depth int) (*node, error) {
	if depth > maxDepth {
		return nil, invalidf("mappings and lists nest more than %d deep", maxDepth)
	}
	switch yn.Kind {
	case yaml.SequenceNode:
		l := &node{kind: kList, yn: yn}
		if !handled {
			l.items = commentItems(l.items, yn.HeadComment)
			l.items = commentItems(l.items, yn.LineComment)
		}
		for _, c := range yn.Content {
			l.items = commentItems(l.items, c.HeadComment)
			l.items = commentItems(l.items, c.LineComment)
			v, err := yamlValue(c, true, depth+1)
			if err != nil {
				return nil, err
			}
			l.items = append(l.items, item{value: v})
			l.items = commentItems(l.items, c.FootComment)
		}
		if !handled {
			l.items = commentItems(l.items, yn.FootComment)
		}
		return l, nil
	case yaml.MappingNode:
		m := &node{kind: kMap, yn: yn}
		return m, yamlMap(m, yn, handled, depth)
	case yaml.ScalarNode:
		var v any
		if err := yn.Decode(&v); err != nil {
			return nil, invalidf("a YAML value at line %d does not decode as its tag says", yn.Line)
		}
		return &node{kind: kScalar, val: v, yn: yn}, nil
	}
	return nil, invalidf("unexpected YAML node at line %d", yn.Line)
}

// generic is a tree as plain Go values (comments left out), for the
// metadata.
func generic(n *node) any {
	switch n.kind {
	case kMap:
		m := make(map[string]any, len(n.items))
		for _, it := range n.items {
			if !it.isComment {
				m[it.key] = generic(it.value)
			}
		}
		return m
	case kList:
		var l []any
		for _, it := range n.items {
			if !it.isComment {
				l = append(l, generic(it.value))
			}
		}
		return l
	}
	return n.val
}

// takeMetadata removes the top-level "sops" entry of every document and
// returns the first document's.
func takeMetadata(docs []*node) (*node, error) {
	var md *node
	for i, d := range docs {
		kept := d.items[:0]
		for _, it := range d.items {
			if !it.isComment && it.key == sopsKey {
				if i == 0 {
					md = it.value
				}
				continue
			}
			kept = append(kept, it)
		}
		d.items = kept
	}
	if md == nil {
		return nil, invalidf("no sops metadata: the first document has no top-level sops mapping")
	}
	return md, nil
}

func decryptYAML(data []byte, ids []age.Identity) (*Result, error) {
	ydocs, err := yamlDocuments(data)
	if err != nil {
		return nil, invalidf("not valid YAML: %v", err)
	}
	if len(ydocs) == 0 {
		return nil, invalidf("no sops metadata: the file has no YAML document")
	}
	docs := make([]*node, len(ydocs))
	for i, yd := range ydocs {
		if err := yamlPlain(yd, 0); err != nil {
			return nil, err
		}
		docs[i] = &node{kind: kMap}
		if err := yamlMap(docs[i], yd, false, 0); err != nil {
			return nil, err
		}
	}
	mdNode, err := takeMetadata(docs)
	if err != nil {
		return nil, err
	}
	md, err := parseMetadata(generic(mdNode))
	if err != nil {
		return nil, err
	}
	w, err := decryptDocs(md, docs, ids, true)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	for _, d := range docs {
		out := yamlOut(d)
		if len(out.Content) == 0 {
			out = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null"} // written as an empty document
		}
		if err := enc.Encode(&yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{out}}); err != nil {
			return nil, invalidf("the plaintext does not encode as YAML: %v", err)
		}
	}
	if err := enc.Close(); err != nil {
		return nil, invalidf("the plaintext does not encode as YAML: %v", err)
	}
	return &Result{Plain: buf.Bytes(), Values: w.values}, nil
}

// yamlOut is n as a YAML node: plain values as they were written, the
// decrypted ones from their type, comments dropped.
func yamlOut(n *node) *yaml.Node {
	switch n.kind {
	case kMap, kList:
		out := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		if n.kind == kList {
			out.Kind, out.Tag = yaml.SequenceNode, "!!seq"
		}
		if n.yn != nil {
			out.Style = n.yn.Style & yaml.FlowStyle
		}
		for _, it := range n.items {
			if it.isComment || it.value.drop {
				continue
			}
			if n.kind == kMap {
				out.Content = append(out.Content, bare(it.keyNode))
			}
			out.Content = append(out.Content, yamlOut(it.value))
		}
		return out
	}
	if !n.dec {
		return bare(n.yn)
	}
	return yamlScalar(n.out)
}

// bare is a copy of a scalar node without its comments.
func bare(n *yaml.Node) *yaml.Node {
	c := *n
	c.HeadComment, c.LineComment, c.FootComment = "", "", ""
	return &c
}

// yamlScalar is a decrypted value as a node that any YAML reader, 1.1 or
// 1.2, reads back with the same type: a string double-quoted (a block
// scalar when it spans lines), a float always with a point.
func yamlScalar(v any) *yaml.Node {
	n := &yaml.Node{Kind: yaml.ScalarNode}
	switch v := v.(type) {
	case string:
		n.Tag, n.Value = "!!str", v
		if !strings.Contains(v, "\n") {
			n.Style = yaml.DoubleQuotedStyle
		}
	case int:
		n.Tag, n.Value = "!!int", strconv.Itoa(v)
	case float64:
		n.Tag, n.Value = "!!float", yamlFloat(v)
	case bool:
		n.Tag, n.Value = "!!bool", strconv.FormatBool(v)
	case time.Time:
		n.Tag, n.Value = "!!timestamp", v.Format(time.RFC3339Nano)
	}
	return n
}

func yamlFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return ".inf"
	case math.IsInf(f, -1):
		return "-.inf"
	case math.IsNaN(f):
		return ".nan"
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	mant, exp, hasExp := strings.Cut(s, "e")
	if !strings.Contains(mant, ".") {
		mant += ".0"
	}
	if hasExp {
		return mant + "e" + exp
	}
	return mant
}
