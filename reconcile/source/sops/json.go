package sops

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"time"

	"filippo.io/age"
)

// jsonRead reads one JSON object as sops's JSON store does (numbers: an
// int when it fits in 64 bits, else a float64), refusing what it lets
// through: duplicate keys, anything after the object.
func jsonRead(data []byte) (*node, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, invalidf("not valid JSON: %v", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, invalidf("not a sops file: the JSON is not an object")
	}
	root, err := jsonObject(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, invalidf("not valid JSON: something follows the object")
	}
	return root, nil
}

func jsonObject(dec *json.Decoder, depth int) (*node, error) {
	if depth > maxDepth {
		return nil, invalidf("mappings and lists nest more than %d deep", maxDepth)
	}
	n := &node{kind: kMap}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, invalidf("not valid JSON: %v", err)
		}
		key, ok := tok.(string)
		if !ok {
			return nil, invalidf("not valid JSON: an object key is not a string")
		}
		if seen[key] {
			return nil, invalidf("the key %s appears twice in an object", strconv.Quote(safeText(key)))
		}
		seen[key] = true
		v, err := jsonValue(dec, depth+1)
		if err != nil {
			return nil, err
		}
		n.items = append(n.items, item{key: key, value: v})
	}
	if _, err := dec.Token(); err != nil { // '}'
		return nil, invalidf("not valid JSON: %v", err)
	}
	return n, nil
}

func jsonValue(dec *json.Decoder, depth int) (*node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, invalidf("not valid JSON: %v", err)
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '{' {
			return jsonObject(dec, depth)
		}
		if depth > maxDepth {
			return nil, invalidf("mappings and lists nest more than %d deep", maxDepth)
		}
		l := &node{kind: kList}
		for dec.More() {
			v, err := jsonValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			l.items = append(l.items, item{value: v})
		}
		if _, err := dec.Token(); err != nil { // ']'
			return nil, invalidf("not valid JSON: %v", err)
		}
		return l, nil
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return &node{kind: kScalar, val: int(i), num: t.String()}, nil
		}
		f, err := t.Float64()
		if err != nil {
			return nil, invalidf("a JSON number is out of range")
		}
		return &node{kind: kScalar, val: f, num: t.String()}, nil
	}
	return &node{kind: kScalar, val: tok}, nil // string, bool or nil
}

func decryptJSON(data []byte, ids []age.Identity, binary bool) (*Result, error) {
	root, err := jsonRead(data)
	if err != nil {
		return nil, err
	}
	mdNode, err := takeMetadata([]*node{root})
	if err != nil {
		return nil, err
	}
	if binary {
		if len(root.items) != 1 || root.items[0].key != "data" || root.items[0].value.kind != kScalar {
			return nil, invalidf("not a sops binary file: it holds more than a \"data\" value and sops metadata")
		}
		if _, ok := root.items[0].value.val.(string); !ok {
			return nil, invalidf("not a sops binary file: its \"data\" is not a string")
		}
	}
	md, err := parseMetadata(generic(mdNode))
	if err != nil {
		return nil, err
	}
	w, err := decryptDocs(md, []*node{root}, ids, !binary)
	if err != nil {
		return nil, err
	}
	if binary {
		v := root.items[0].value
		data := v.val
		if v.dec {
			data = v.out
		}
		s, ok := data.(string)
		if !ok {
			return nil, invalidf("not a sops binary file: its \"data\" does not decrypt to a string")
		}
		return &Result{Plain: []byte(s), Values: w.values}, nil
	}
	var buf bytes.Buffer
	if err := jsonOut(&buf, root); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, buf.Bytes(), "", "  "); err != nil {
		return nil, invalidf("the plaintext does not encode as JSON")
	}
	out.WriteByte('\n')
	return &Result{Plain: out.Bytes(), Values: w.values}, nil
}

// jsonOut writes n as compact JSON: keys in order, plain numbers as
// written, decrypted values from their type.
func jsonOut(buf *bytes.Buffer, n *node) error {
	switch n.kind {
	case kMap, kList:
		open, close := byte('{'), byte('}')
		if n.kind == kList {
			open, close = '[', ']'
		}
		buf.WriteByte(open)
		first := true
		for _, it := range n.items {
			if it.isComment || it.value.drop {
				continue
			}
			if !first {
				buf.WriteByte(',')
			}
			first = false
			if n.kind == kMap {
				jsonString(buf, it.key)
				buf.WriteByte(':')
			}
			if err := jsonOut(buf, it.value); err != nil {
				return err
			}
		}
		buf.WriteByte(close)
		return nil
	}
	v := n.val
	if n.dec {
		v = n.out
	} else if n.num != "" {
		buf.WriteString(n.num)
		return nil
	}
	switch v := v.(type) {
	case nil:
		buf.WriteString("null")
	case string:
		jsonString(buf, v)
	case bool:
		buf.WriteString(strconv.FormatBool(v))
	case int:
		buf.WriteString(strconv.Itoa(v))
	case float64:
		b, err := json.Marshal(v)
		if err != nil {
			return invalidf("a decrypted float is not a JSON number (NaN or infinite)")
		}
		buf.Write(b)
	case time.Time:
		jsonString(buf, v.Format(time.RFC3339Nano))
	default:
		return invalidf("a value of type %T does not encode as JSON", v)
	}
	return nil
}

// jsonString writes s as a JSON string, without escaping HTML characters.
func jsonString(buf *bytes.Buffer, s string) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	buf.WriteString(strings.TrimSuffix(b.String(), "\n"))
}
