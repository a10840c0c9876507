package sops

import (
	"crypto/cipher"
	"crypto/sha512"
	"crypto/subtle"
	"fmt"
	"hash"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"
)

// The formats are read into one tree, shaped as sops's own (its TreeBranch):
// mappings and lists whose entries may be comments, which take part in the
// comment rules but not in the MAC nor in the plaintext.

type kind uint8

const (
	kMap kind = iota
	kList
	kScalar
)

// node is a mapping, a list or a scalar of a document.
type node struct {
	kind  kind
	items []item
	// val is a scalar's value as sops reads it: string, int, float64,
	// bool, time.Time or nil (anything else is refused when walked).
	val any

	// dec is set when the value was encrypted: out is its decrypted value.
	dec bool
	out any
	// drop marks a list element that decrypted to a comment.
	drop bool

	// yn is the YAML node this one was read from (scalars: emitted as is
	// when not encrypted; mappings and lists: their style).
	yn *yaml.Node
	// num is a plain JSON number's text, emitted as is.
	num string
}

// item is an entry of a mapping (key and value) or of a list (value), or a
// comment in either.
type item struct {
	isComment bool
	comment   string // the comment's text, without its '#'
	key       string
	keyNode   *yaml.Node // YAML: the key as written
	value     *node
}

// maxDepth bounds how deep mappings and lists nest.
const maxDepth = 256

// rules decides which values are encrypted, as sops's shouldBeEncrypted:
// the suffix and regex rules test every key of the path, the comment rules
// every comment active at the value.
type rules struct {
	name                         string // the rule, for errors ("unencrypted_suffix \"_unencrypted\"")
	unencSuffix, encSuffix       string
	unencRe, encRe               *regexp.Regexp
	unencCommentRe, encCommentRe *regexp.Regexp

	// matched remembers each regular expression's answer for each key or
	// comment: a path is tested key by key for every value under it, and a
	// file may pair a costly expression with long keys (matching is linear,
	// but in the product of both lengths).
	matched map[matchKey]bool
	// inst is the rule's regular expression's instructions (a file has
	// one rule); work is what the tests so far cost (bytes tested times
	// inst): over maxRuleWork the file is refused.
	inst int
	work int64
}

// maxRuleWork bounds what testing one file's keys and comments against its
// rule may cost: a fraction of a second.
const maxRuleWork = 1 << 25

// overWork reports whether the rule's tests cost more than maxRuleWork.
func (r *rules) overWork() bool { return r.work > maxRuleWork }

type matchKey struct {
	re   *regexp.Regexp
	text string
}

// maxMatched bounds a key or comment that a regular expression of the
// file's rule is tested against (with maxRuleLen, what one test costs).
const maxMatched = 1024

// hasRegexp reports whether the rule tests keys or comments with a
// regular expression.
func (r *rules) hasRegexp() bool {
	return r.unencRe != nil || r.encRe != nil || r.unencCommentRe != nil || r.encCommentRe != nil
}

// match is re.MatchString(text), once per pair.
func (r *rules) match(re *regexp.Regexp, text string) bool {
	k := matchKey{re, text}
	if m, ok := r.matched[k]; ok {
		return m
	}
	if r.matched == nil {
		r.matched = map[matchKey]bool{}
	}
	if r.overWork() {
		return false // the file is refused (walkMap)
	}
	r.work += int64(len(text)+1) * int64(r.inst)
	m := re.MatchString(text)
	r.matched[k] = m
	return m
}

func (r *rules) encrypted(path []string, stack [][]string, isComment bool) bool {
	enc := true
	if r.unencSuffix != "" {
		for _, k := range path {
			if strings.HasSuffix(k, r.unencSuffix) {
				enc = false
				break
			}
		}
	}
	if r.encSuffix != "" {
		enc = false
		for _, k := range path {
			if strings.HasSuffix(k, r.encSuffix) {
				enc = true
				break
			}
		}
	}
	if r.unencRe != nil {
		for _, k := range path {
			if r.match(r.unencRe, k) {
				enc = false
				break
			}
		}
	}
	if r.encRe != nil {
		enc = false
		for _, k := range path {
			if r.match(r.encRe, k) {
				enc = true
				break
			}
		}
	}
	if r.unencCommentRe != nil {
	unenc:
		for _, cs := range stack {
			for _, c := range cs {
				if r.match(r.unencCommentRe, c) {
					enc = false
					break unenc
				}
			}
		}
	}
	if r.encCommentRe != nil {
		enc = false
		last := len(stack) - 1
	encd:
		for i, cs := range stack {
			for j, c := range cs {
				// A comment that matches is itself left plain: the
				// last comment of the innermost level, when walking a
				// comment, is the one being decided.
				if isComment && i == last && j == len(cs)-1 {
					continue
				}
				if r.match(r.encCommentRe, c) {
					enc = true
					break encd
				}
			}
		}
	}
	return enc
}

// walker decrypts a tree's values in file order, verifies the rule and
// computes the MAC.
type walker struct {
	rules  *rules
	aead   cipher.AEAD
	macAll bool // every value in the MAC, not only the encrypted ones
	mac    hash.Hash
	utf8   bool // a decrypted string must be valid UTF-8
	values []string
}

func newWalker(r *rules, aead cipher.AEAD, macOnlyEncrypted bool) *walker {
	w := &walker{rules: r, aead: aead, macAll: !macOnlyEncrypted, mac: sha512.New()}
	if macOnlyEncrypted {
		w.mac.Write(macOnlyEncryptedPrefix[:])
	}
	return w
}

// macOnlyEncryptedPrefix starts the MAC of a file with mac_only_encrypted,
// so that it never equals the MAC of the same values without it: SHA-256
// of "sops".
var macOnlyEncryptedPrefix = [32]byte{
	0x8a, 0x3f, 0xd2, 0xad, 0x54, 0xce, 0x66, 0x52, 0x7b, 0x10, 0x34, 0xf3, 0xd1, 0x47, 0xbe, 0x0b,
	0x0b, 0x97, 0x5b, 0x3b, 0xf4, 0x4f, 0x72, 0xc6, 0xfd, 0xad, 0xec, 0x81, 0x76, 0xf2, 0x7d, 0x69,
}

// pathText is a value's location for errors: keys joined by dots, list
// indices in brackets.
type pathText []string

func (p pathText) String() string { return strconv.Quote(strings.Join(p, "")) }

func (p pathText) key(k string) pathText {
	q := make(pathText, len(p), len(p)+1)
	copy(q, p)
	if len(q) > 0 {
		k = "." + k
	}
	return append(q, k)
}

func (p pathText) index(i int) pathText {
	q := make(pathText, len(p), len(p)+1)
	copy(q, p)
	return append(q, "["+strconv.Itoa(i)+"]")
}

// walkDoc walks one document (a mapping).
func (w *walker) walkDoc(root *node) error {
	return w.walkMap(root, nil, nil, nil, 0)
}

func (w *walker) walkValue(n *node, path []string, at pathText, stack [][]string, depth int, inList bool) error {
	switch n.kind {
	case kMap:
		return w.walkMap(n, path, at, stack, depth+1)
	case kList:
		return w.walkList(n, path, at, stack, depth+1)
	}
	return w.leaf(n, path, at, stack, inList)
}

func (w *walker) walkMap(n *node, path []string, at pathText, stack [][]string, depth int) error {
	if depth > maxDepth {
		return invalidf("mappings and lists nest more than %d deep", maxDepth)
	}
	stack = append(stack, nil)
	top := len(stack) - 1
	for _, it := range n.items {
		if it.isComment {
			// Comments count for the comment rules; they are neither
			// in the MAC nor in the plaintext, so they are not decrypted.
			if len(it.comment) > maxMatched && w.rules.hasRegexp() {
				return invalidf("a comment longer than %d bytes, tested against the file's rule: refused", maxMatched)
			}
			stack[top] = append(stack[top], it.comment)
			continue
		}
		if len(it.key) > maxMatched && w.rules.hasRegexp() {
			return invalidf("a key longer than %d bytes, tested against the file's rule: refused", maxMatched)
		}
		if err := w.walkValue(it.value, append(path[:len(path):len(path)], it.key), at.key(it.key), stack, depth, false); err != nil {
			return err
		}
		if w.rules.overWork() {
			return invalidf("testing the file's keys and comments against its rule (%s) costs too much: refused", w.rules.name)
		}
		stack[top] = nil
	}
	return nil
}

func (w *walker) walkList(n *node, path []string, at pathText, stack [][]string, depth int) error {
	if depth > maxDepth {
		return invalidf("mappings and lists nest more than %d deep", maxDepth)
	}
	stack = append(stack, nil)
	top := len(stack) - 1
	i := 0
	for _, it := range n.items {
		if it.isComment {
			stack[top] = append(stack[top], it.comment)
			continue
		}
		if err := w.walkValue(it.value, path, at.index(i), stack, depth, true); err != nil {
			return err
		}
		i++
		stack[top] = nil
	}
	return nil
}

// leaf handles a scalar: decrypts it when the rule says it is encrypted,
// refuses it when it is not as the rule says, and adds it to the MAC.
func (w *walker) leaf(n *node, path []string, at pathText, stack [][]string, inList bool) error {
	if n.val == nil {
		return nil // null is neither encrypted nor in the MAC
	}
	s, isString := n.val.(string)
	if !w.rules.encrypted(path, stack, false) {
		if isString && strings.HasPrefix(s, encPrefix) {
			return invalidf("the value at %v is encrypted, but the file's rule (%s) says it is not", at, w.rules.name)
		}
		if w.macAll {
			b, ok := macBytes(n.val)
			if !ok {
				return invalidf("the value at %v is of a type sops does not read (%T)", at, n.val)
			}
			w.mac.Write(b)
		}
		return nil
	}
	if !isString {
		return invalidf("the value at %v is not encrypted, but the file's rule (%s) says it is", at, w.rules.name)
	}
	if s == "" {
		return nil // sops never encrypts an empty string; it adds nothing to the MAC
	}
	ev, err := parseEnc(s)
	if err != nil {
		return invalidf("the value at %v is not encrypted, but the file's rule (%s) says it is", at, w.rules.name)
	}
	pt, err := ev.open(w.aead, strings.Join(path, ":")+":")
	if err != nil {
		return invalidf("the value at %v does not authenticate: it was changed, or moved from another key", at)
	}
	v, err := typed(ev.typ, pt)
	if err != nil {
		return invalidf("the value at %v does not decrypt to a %s", at, safeText(ev.typ))
	}
	if s, ok := v.(string); ok && w.utf8 && !utf8.ValidString(s) {
		return invalidf("the value at %v decrypts to a string that is not UTF-8", at)
	}
	if _, ok := v.(comment); ok {
		if !inList {
			return invalidf("the value at %v decrypts to a comment", at)
		}
		n.drop = true // an encrypted comment in a list: not a value, not in the MAC
		return nil
	}
	b, _ := macBytes(v)
	w.mac.Write(b)
	n.dec, n.out = true, v
	w.values = append(w.values, valueText(v))
	return nil
}

// checkMAC compares the MAC of what was walked with the file's.
func (w *walker) checkMAC(md *metadata) error {
	ev, err := parseEnc(md.mac)
	if err != nil || ev.typ != "str" {
		return invalidf("the file's MAC is not an encrypted string")
	}
	pt, err := ev.open(w.aead, md.lastModifiedAAD)
	if err != nil {
		return invalidf("the file's MAC does not authenticate: it, or lastmodified, was changed")
	}
	sum := fmt.Sprintf("%X", w.mac.Sum(nil))
	if subtle.ConstantTimeCompare(pt, []byte(sum)) != 1 {
		return invalidf("MAC mismatch: the file's values, their order or its MAC rule were changed")
	}
	return nil
}
