package sops

import (
	"bytes"
	"sort"
	"strconv"
	"strings"

	"filippo.io/age"
)

// Dotenv: one KEY=value a line (a value's newlines written as \n), lines
// starting with # comments, blank lines skipped. The metadata is
// flattened into sops_ keys: a nested key joined with __map_, a list
// index with __list_ (sops_age__list_0__map_enc=…).

const (
	flatMap  = "__map_"
	flatList = "__list_"
)

func decryptDotenv(data []byte, ids []age.Identity) (*Result, error) {
	root := &node{kind: kMap}
	flat := map[string]string{}
	seen := map[string]bool{}
	n := 0
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		n++
		if len(line) == 0 {
			continue
		}
		if line[0] == '#' {
			root.items = append(root.items, item{isComment: true, comment: string(line[1:])})
			continue
		}
		k, v, ok := strings.Cut(string(line), "=")
		if !ok {
			return nil, invalidf("line %d of the dotenv file is not KEY=value", n)
		}
		if seen[k] {
			return nil, invalidf("the key %s appears twice in the dotenv file", strconv.Quote(safeText(k)))
		}
		seen[k] = true
		v = strings.ReplaceAll(v, `\n`, "\n")
		if name, ok := strings.CutPrefix(k, sopsPrefix); ok {
			flat[name] = v
			continue
		}
		root.items = append(root.items, item{key: k, value: &node{kind: kScalar, val: v}})
	}
	if _, ok := flat["mac"]; !ok {
		return nil, invalidf("no sops metadata: the dotenv file has no sops_mac line")
	}
	mdv, err := unflatten(flat)
	if err != nil {
		return nil, err
	}
	md, err := parseMetadata(mdv)
	if err != nil {
		return nil, err
	}
	w, err := decryptDocs(md, []*node{root}, ids, false)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	for _, it := range root.items {
		if it.isComment {
			continue
		}
		v := it.value.val
		if it.value.dec {
			v = it.value.out
		}
		s, ok := v.(string)
		if !ok {
			s = valueText(v)
		}
		out.WriteString(it.key)
		out.WriteByte('=')
		out.WriteString(strings.ReplaceAll(s, "\n", `\n`))
		out.WriteByte('\n')
	}
	return &Result{Plain: out.Bytes(), Values: w.values}, nil
}

// flatNode is a node of the metadata being unflattened.
type flatNode struct {
	value   *string
	keys    map[string]*flatNode
	indices map[int]*flatNode
}

// maxFlatIndex bounds a flattened list index.
const maxFlatIndex = maxMasterKeys

// unflatten rebuilds the metadata from its flattened keys.
func unflatten(flat map[string]string) (any, error) {
	root := &flatNode{}
	for k, v := range flat {
		cur := root
		for _, tok := range flatTokens(k) {
			if tok.list {
				if tok.index < 0 || tok.index > maxFlatIndex {
					return nil, invalidf("the sops metadata's dotenv key %s has a list index out of range", strconv.Quote(safeText(sopsPrefix+k)))
				}
				if cur.indices == nil {
					cur.indices = map[int]*flatNode{}
				}
				if cur.indices[tok.index] == nil {
					cur.indices[tok.index] = &flatNode{}
				}
				cur = cur.indices[tok.index]
				continue
			}
			if cur.keys == nil {
				cur.keys = map[string]*flatNode{}
			}
			if cur.keys[tok.key] == nil {
				cur.keys[tok.key] = &flatNode{}
			}
			cur = cur.keys[tok.key]
		}
		v := v
		cur.value = &v
	}
	return root.generic()
}

func (f *flatNode) generic() (any, error) {
	kinds := 0
	for _, b := range []bool{f.value != nil, len(f.keys) > 0, len(f.indices) > 0} {
		if b {
			kinds++
		}
	}
	if kinds > 1 {
		return nil, invalidf("the sops metadata's dotenv keys mix a value, a mapping and a list at one place")
	}
	switch {
	case f.value != nil:
		return *f.value, nil
	case len(f.indices) > 0:
		l := make([]any, len(f.indices))
		for i := range l {
			c, ok := f.indices[i]
			if !ok {
				return nil, invalidf("the sops metadata's dotenv keys leave a gap in a list")
			}
			v, err := c.generic()
			if err != nil {
				return nil, err
			}
			l[i] = v
		}
		return l, nil
	}
	m := map[string]any{}
	keys := make([]string, 0, len(f.keys))
	for k := range f.keys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v, err := f.keys[k].generic()
		if err != nil {
			return nil, err
		}
		m[k] = v
	}
	return m, nil
}

type flatToken struct {
	list  bool
	key   string
	index int
}

// flatTokens splits a flattened key at its __map_ and __list_ separators.
func flatTokens(k string) []flatToken {
	var toks []flatToken
	cur := flatToken{}
	start := 0
	finish := func(end int) {
		s := k[start:end]
		if cur.list {
			n, err := strconv.Atoi(s)
			if err != nil {
				n = -1
			}
			cur.index = n
		} else {
			cur.key = s
		}
		toks = append(toks, cur)
	}
	for i := 0; i < len(k); {
		switch {
		case strings.HasPrefix(k[i:], flatMap):
			finish(i)
			cur = flatToken{}
			i += len(flatMap)
			start = i
		case strings.HasPrefix(k[i:], flatList):
			finish(i)
			cur = flatToken{list: true}
			i += len(flatList)
			start = i
		default:
			i++
		}
	}
	finish(len(k))
	return toks
}
