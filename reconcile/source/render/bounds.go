package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	yaml "go.yaml.in/yaml/v3"
)

// aliasAllowance is the number of nodes a YAML document may expand to on
// top of MaxAliasExpansion times its own nodes, so that a small document
// may use a few anchors freely.
const aliasAllowance = 10000

// Budget counts what one render has used against its limits, and holds
// what the render knows to be secret and its SOPS decryption. It is safe
// for concurrent use (kustomize reads through the file system from its own
// goroutine).
type Budget struct {
	lim     Limits
	read    atomic.Int64 // bytes read from the tree
	objects int          // objects produced (only touched by the decoder)
	// secrets is what the render knows to be secret: no error of it may
	// quote any of it (Safe).
	secrets Secrets
	// dec decrypts the render's SOPS-encrypted files (decrypt.go).
	dec decryption
}

// NewBudget returns the budget of one render under lim (zero fields take
// DefaultLimits). It decrypts nothing until given keys (ReadKeys, SetKeys).
func NewBudget(lim Limits) *Budget { return &Budget{lim: lim.WithDefaults()} }

// Limits are the limits the render is held to.
func (b *Budget) Limits() Limits { return b.lim }

// Secrets is what the render knows to be secret.
func (b *Budget) Secrets() *Secrets { return &b.secrets }

// BytesRead is how many bytes the render has read from the tree so far.
func (b *Budget) BytesRead() int64 { return b.read.Load() }

// SetBytesRead sets the count of bytes read (a render done again from the
// start reads the same files: they are counted once).
func (b *Budget) SetBytesRead(n int64) { b.read.Store(n) }

// Safe is err with every secret value the render knows of removed from
// its text (see Secrets.redact), then bounded in length (BoundError): the
// whole text is redacted before any of it is cut.
func (b *Budget) Safe(err error) error { return BoundError(b.secrets.redact(err)) }

// Again is a budget for a second render of the same revision: the same
// limits, a count of its own, and the decryption's keys and files.
func (b *Budget) Again() *Budget {
	nb := &Budget{lim: b.lim}
	b.dec.shareWith(&nb.dec)
	return nb
}

// readBytes charges n bytes read from file against MaxBytes.
func (b *Budget) readBytes(file string, n int64) error {
	if total := b.read.Add(n); total > b.lim.MaxBytes {
		return NewLimitError(LimitBytes, total, b.lim.MaxBytes, file)
	}
	return nil
}

// fileSize refuses a file larger than MaxFileBytes, before it is read.
func (b *Budget) fileSize(file string, size int64) error {
	if size > b.lim.MaxFileBytes {
		return NewLimitError(LimitFileBytes, size, b.lim.MaxFileBytes, file)
	}
	return nil
}

// Inspect checks every document of a YAML or JSON file before it is
// decoded: alias expansion, nesting depth and, when numbers is set, that
// every number is exactly representable. It parses into yaml.v3 nodes,
// which keep aliases unexpanded, so a bomb costs only its own size here.
func (b *Budget) Inspect(file string, data []byte, numbers bool) error {
	b.secrets.addFile(file, data)
	secretFile := b.secrets.isSecretFile(file)
	if looksLikeJSON(data) {
		return b.inspectJSON(file, data, numbers)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for doc := 1; ; doc++ {
		var n yaml.Node
		if err := dec.Decode(&n); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return &ManifestError{File: file, Err: &syntaxError{b.secrets.parseError(file, data, doc, false, err)}}
		}
		b.secrets.addDocument(file, &n)
		w := &nodeWalker{memo: map[*yaml.Node]nodeCost{}, visiting: map[*yaml.Node]bool{}}
		own := countOwn(&n)
		c, err := w.cost(&n)
		if err != nil {
			return &ManifestError{File: file, Err: fmt.Errorf("document %d: %w", doc, err)}
		}
		if max := int64(b.lim.MaxAliasExpansion)*own + aliasAllowance; c.nodes > max {
			return NewLimitError(LimitAliasExpansion, c.nodes, max, file)
		}
		// The document node itself adds one level.
		if c.depth-1 > int64(b.lim.MaxDepth) {
			return b.depthError(file, &n, c.depth-1)
		}
		if numbers {
			if err := checkNumbers(file, &n, secretFile); err != nil {
				return err
			}
			if err := checkYAMLSecretKeys(file, &n); err != nil {
				return err
			}
		}
	}
}

func (b *Budget) depthError(file string, doc *yaml.Node, depth int64) error {
	err := NewLimitError(LimitDepth, depth, int64(b.lim.MaxDepth), file)
	err.Object = objectRef(docRoot(doc))
	return err
}

// syntaxError is a file that yaml.v3 cannot parse. Kustomize reads files
// that are not YAML (env files, data), so its file system ignores these.
type syntaxError struct{ err error }

func (e *syntaxError) Error() string { return e.err.Error() }
func (e *syntaxError) Unwrap() error { return e.err }

// looksLikeJSON is the test utilyaml's decoder makes: JSON starts with "{".
func looksLikeJSON(data []byte) bool {
	t := bytes.TrimLeft(data, " \t\r\n")
	return len(t) > 0 && t[0] == '{'
}

// inspectJSON checks depth and numbers of a JSON file (JSON has no
// aliases). Syntax errors are left to the decoder, which reports them.
func (b *Budget) inspectJSON(file string, data []byte, numbers bool) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	for {
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil //nolint:nilerr // the decoder reports syntax errors
		}
		b.secrets.addJSON(file, v)
		obj, _ := v.(map[string]any)
		ref := jsonRef(obj)
		if d := jsonDepth(v); d > int64(b.lim.MaxDepth) {
			err := NewLimitError(LimitDepth, d, int64(b.lim.MaxDepth), file)
			err.Object = ref
			return err
		}
		if numbers {
			if err := checkJSONNumbers(file, ref, "", v, b.secrets.isSecretFile(file)); err != nil {
				return err
			}
			if err := checkJSONSecretKeys(file, obj); err != nil {
				return err
			}
		}
	}
}

func jsonDepth(v any) int64 {
	var d int64
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			d = max(d, jsonDepth(e))
		}
		return d + 1
	case []any:
		for _, e := range v {
			d = max(d, jsonDepth(e))
		}
		return d + 1
	}
	return 0
}

// nodeCost is what a node costs once its aliases are expanded: its node
// count and its nesting depth (maps and sequences).
type nodeCost struct{ nodes, depth int64 }

type nodeWalker struct {
	memo     map[*yaml.Node]nodeCost
	visiting map[*yaml.Node]bool
}

// costCap keeps the counts far from overflow; anything above it is over
// every limit anyway.
const costCap = 1 << 50

func (w *nodeWalker) cost(n *yaml.Node) (nodeCost, error) {
	if c, ok := w.memo[n]; ok {
		return c, nil
	}
	if w.visiting[n] {
		return nodeCost{}, errors.New("recursive YAML alias")
	}
	w.visiting[n] = true
	defer delete(w.visiting, n)
	var c nodeCost
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			return nodeCost{}, errors.New("unknown YAML alias")
		}
		t, err := w.cost(n.Alias)
		if err != nil {
			return nodeCost{}, err
		}
		c = t
	} else {
		c.nodes = 1
		for _, ch := range n.Content {
			t, err := w.cost(ch)
			if err != nil {
				return nodeCost{}, err
			}
			c.nodes = min(c.nodes+t.nodes, costCap)
			c.depth = max(c.depth, t.depth)
		}
		if n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode || n.Kind == yaml.DocumentNode {
			c.depth++
		}
	}
	w.memo[n] = c
	return c, nil
}

// countOwn counts the nodes of n as written (an alias counts once).
func countOwn(n *yaml.Node) int64 {
	c := int64(1)
	if n.Kind != yaml.AliasNode {
		for _, ch := range n.Content {
			c += countOwn(ch)
		}
	}
	return c
}
