package render

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"recond.dev/recond/reconcile/source/tree"
)

// Plain, the plain reader, decodes every manifest file below dir (whose path in the
// repository is base) in lexical path order. Hidden files and directories
// (".github/...") are skipped. A symbolic link is followed when it leads
// to a file inside the repository (its content is read under the link's
// name); one that dangles, leads outside or leads to a directory fails the
// render, as does a file that cannot be read. Only the tree is walked up
// front: each blob is looked up when its turn comes, and read only once its
// size has passed the limits.
func Plain(ctx context.Context, root, dir tree.Dir, base string, b *Budget) ([]Manifest, error) {
	type entry struct {
		name   string // below dir
		kind   tree.EntryKind
		parent tree.Dir
	}
	var files []entry
	var walk func(d tree.Dir, at string) error
	walk = func(d tree.Dir, at string) error {
		for _, e := range d.Entries() {
			name := path.Join(at, e.Name)
			switch {
			case e.Kind == tree.KindDir:
				sub, err := d.Dir(e.Name)
				if err != nil {
					return &ManifestError{File: path.Join(base, name), Err: err}
				}
				if err := walk(sub, name); err != nil {
					return err
				}
			case e.Kind == tree.KindOther || hidden(name):
			case e.Kind == tree.KindSymlink || isManifest(name):
				files = append(files, entry{name, e.Kind, d})
			}
		}
		return nil
	}
	if err := walk(dir, ""); err != nil {
		return nil, err
	}
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })

	r := tree.NewResolver(root)
	var out []Manifest
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		name := path.Join(base, f.name)
		var blob tree.File
		if f.kind == tree.KindSymlink {
			n, err := r.Resolve(name)
			if err != nil {
				return nil, &ManifestError{File: name, Err: err}
			}
			if n.File == nil {
				return nil, &ManifestError{File: name, Err: fmt.Errorf("symlink to directory %s: not followed; list its files or link them one by one", n.Path)}
			}
			if !isManifest(f.name) {
				continue
			}
			blob = n.File
		} else {
			bl, err := f.parent.File(path.Base(f.name))
			if err != nil {
				return nil, &ManifestError{File: name, Err: fmt.Errorf("read: %w", err)}
			}
			blob = bl
		}
		content, err := b.ReadFile(name, blob)
		if err != nil {
			return nil, err
		}
		b.dec.setRole(name, RoleManifest)
		if content, err = b.Decrypt(name, content); err != nil {
			return nil, err
		}
		ms, err := b.Decode(name, content)
		if err != nil {
			return nil, err
		}
		out = append(out, ms...)
	}
	return out, nil
}

func isManifest(name string) bool {
	switch path.Ext(name) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

func hidden(p string) bool {
	for _, part := range strings.Split(p, "/") {
		if strings.HasPrefix(part, ".") {
			return true
		}
	}
	return false
}

// Decode splits a YAML (multi-document) or JSON file into objects,
// skipping empty documents and expanding lists. The file is inspected
// first (alias expansion, depth, exact numbers), so that the decoder never
// expands a bomb or rounds a number.
func (b *Budget) Decode(file string, data []byte) ([]Manifest, error) {
	if err := b.Inspect(file, data, true); err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []Manifest
	for doc := 1; ; doc++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, &ManifestError{File: file, Err: b.secrets.parseError(file, data, doc, true, err)}
		}
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 || string(raw) == "null" { // empty or only comments
			continue
		}
		// util/json keeps integers as int64, as Unstructured expects.
		var obj map[string]any
		if err := utiljson.Unmarshal(raw, &obj); err != nil {
			return nil, &ManifestError{File: file, Err: fmt.Errorf("document %d: not an object: %w", doc, err)}
		}
		var err error
		if out, err = b.appendObject(out, file, doc, obj); err != nil {
			return nil, err
		}
	}
}

// appendObject validates obj and appends it, or its items when it is a
// list (kind "List", or any "...List" kind with items, as kubectl does).
func (b *Budget) appendObject(out []Manifest, file string, doc int, obj map[string]any) ([]Manifest, error) {
	u := &unstructured.Unstructured{Object: obj}
	kind, name := u.GetKind(), u.GetName()
	if items, ok := obj["items"]; kind == "List" || (ok && strings.HasSuffix(kind, "List")) {
		list, ok := items.([]any)
		if !ok && items != nil {
			return nil, &ManifestError{File: file, Object: kind, Err: fmt.Errorf("document %d: items is not a list", doc)}
		}
		for i, item := range list {
			m, ok := item.(map[string]any)
			if !ok {
				return nil, &ManifestError{File: file, Object: kind, Err: fmt.Errorf("document %d: item %d is not an object", doc, i)}
			}
			var err error
			if out, err = b.appendObject(out, file, doc, m); err != nil {
				return nil, err
			}
		}
		return out, nil
	}

	var missing []string
	if u.GetAPIVersion() == "" {
		missing = append(missing, "apiVersion")
	}
	if kind == "" {
		missing = append(missing, "kind")
	}
	if name == "" {
		missing = append(missing, "metadata.name")
	}
	if len(missing) > 0 {
		return nil, &ManifestError{File: file, Object: Ref(kind, name), Err: fmt.Errorf("document %d: missing %s", doc, strings.Join(missing, ", "))}
	}
	if d := jsonDepth(obj); d > int64(b.lim.MaxDepth) {
		err := NewLimitError(LimitDepth, d, int64(b.lim.MaxDepth), file)
		err.Object = Ref(kind, name)
		return nil, err
	}
	if b.objects++; b.objects > b.lim.MaxObjects {
		return nil, NewLimitError(LimitObjects, int64(b.objects), int64(b.lim.MaxObjects), file)
	}
	return append(out, Manifest{File: file, Object: u}), nil
}
