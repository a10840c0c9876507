package source

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// Manifest is one Kubernetes object read from the repository.
type Manifest struct {
	// File is the path of the file inside the repository, or
	// "kustomize build <path>" for objects produced by kustomize.
	File string
	// Object is the object exactly as written (no namespace is added).
	Object *unstructured.Unstructured
}

// ManifestError reports a manifest that cannot be read or is not a valid
// object. Render wraps it; use errors.As to get at it.
type ManifestError struct {
	// File is as in Manifest.File.
	File string
	// Object is "Kind/name", or as much of it as is known, or "".
	Object string
	Err    error
}

func (e *ManifestError) Error() string {
	if e.Object == "" {
		return e.File + ": " + e.Err.Error()
	}
	return e.File + ": " + e.Object + ": " + e.Err.Error()
}

func (e *ManifestError) Unwrap() error { return e.Err }

// kustomizationFiles are the names kustomize looks for, in its order.
var kustomizationFiles = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

// Render reads the manifests under Config.Path at commit sha (a full SHA,
// normally from Fetch). For a remote repository the commit must be in the
// cache, i.e. Fetch must have returned it.
//
// Render checks only that each object has apiVersion, kind and
// metadata.name; namespaces, duplicates and scope are the caller's concern.
func (s *Source) Render(ctx context.Context, sha string) ([]Manifest, error) {
	if !isSHA(sha) {
		return nil, fmt.Errorf("render %s: %q is not a full commit SHA", s.display, sha)
	}
	sha = strings.ToLower(sha)
	if s.kind != kindLocal {
		mu := cacheLock(s.cache)
		mu.RLock()
		defer mu.RUnlock()
	}
	ms, err := s.render(ctx, sha)
	if err != nil {
		return nil, fmt.Errorf("render %s at %s: %w", s.display, sha[:12], err)
	}
	return ms, nil
}

func (s *Source) render(ctx context.Context, sha string) ([]Manifest, error) {
	repo, err := s.open()
	if err != nil {
		return nil, err
	}
	commit, err := repo.CommitObject(plumbing.NewHash(sha))
	if err != nil {
		return nil, fmt.Errorf("commit %s: %w", sha, err)
	}
	root, err := commit.Tree()
	if err != nil {
		return nil, fmt.Errorf("commit %s: %w", sha, err)
	}
	dir := root
	if s.dir != "." {
		if dir, err = root.Tree(s.dir); err != nil {
			if errors.Is(err, object.ErrDirectoryNotFound) {
				return nil, &ManifestError{File: s.dir, Err: err}
			}
			return nil, fmt.Errorf("%s: %w", s.dir, err)
		}
	}
	for _, name := range kustomizationFiles {
		if e, err := dir.FindEntry(name); err == nil && e.Mode.IsFile() {
			return s.kustomize(ctx, root)
		}
	}
	return readDir(ctx, dir, s.dir)
}

// readDir decodes every manifest file below dir (whose path in the
// repository is base) in lexical path order. Hidden files and directories
// (".github/...") and symbolic links are skipped.
func readDir(ctx context.Context, dir *object.Tree, base string) ([]Manifest, error) {
	var files []*object.File
	err := dir.Files().ForEach(func(f *object.File) error {
		if f.Mode == filemode.Symlink || hidden(f.Name) {
			return nil
		}
		switch path.Ext(f.Name) {
		case ".yaml", ".yml", ".json":
			files = append(files, f)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", base, err)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })

	var out []Manifest
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		name := path.Join(base, f.Name)
		content, err := f.Contents()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		ms, err := decode(name, []byte(content))
		if err != nil {
			return nil, err
		}
		out = append(out, ms...)
	}
	return out, nil
}

func hidden(p string) bool {
	for _, part := range strings.Split(p, "/") {
		if strings.HasPrefix(part, ".") {
			return true
		}
	}
	return false
}

// decode splits a YAML (multi-document) or JSON file into objects,
// skipping empty documents and expanding lists.
func decode(file string, data []byte) ([]Manifest, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []Manifest
	for doc := 1; ; doc++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, &ManifestError{File: file, Err: fmt.Errorf("document %d: %w", doc, err)}
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
		if out, err = appendObject(out, file, doc, obj); err != nil {
			return nil, err
		}
	}
}

// appendObject validates obj and appends it, or its items when it is a
// list (kind "List", or any "...List" kind with items, as kubectl does).
func appendObject(out []Manifest, file string, doc int, obj map[string]any) ([]Manifest, error) {
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
			if out, err = appendObject(out, file, doc, m); err != nil {
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
		ref := kind + "/" + name
		switch {
		case kind == "":
			ref = name
		case name == "":
			ref = kind
		}
		return nil, &ManifestError{File: file, Object: ref, Err: fmt.Errorf("document %d: missing %s", doc, strings.Join(missing, ", "))}
	}
	return append(out, Manifest{File: file, Object: u}), nil
}

// kustomizeMu serialises kustomize runs: kustomize keeps global state (its
// OpenAPI schema).
var kustomizeMu sync.Mutex

// kustomize builds the kustomization at s.dir from an in-memory copy of the
// whole commit, so that bases such as ../base resolve.
func (s *Source) kustomize(ctx context.Context, root *object.Tree) ([]Manifest, error) {
	label := "kustomize build " + s.dir
	if err := checkRemote(root, s.dir, map[string]bool{}); err != nil {
		return nil, &ManifestError{File: label, Err: err}
	}
	fs := filesys.MakeFsInMemory()
	err := root.Files().ForEach(func(f *object.File) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if f.Mode == filemode.Symlink {
			return nil
		}
		content, err := f.Contents()
		if err != nil {
			return fmt.Errorf("%s: %w", f.Name, err)
		}
		return fs.WriteFile("/"+f.Name, []byte(content))
	})
	if err != nil {
		return nil, err
	}

	kustomizeMu.Lock()
	defer kustomizeMu.Unlock()
	// The default options disable plugins and restrict loads to the
	// kustomization's root.
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, path.Join("/", s.dir))
	if err != nil {
		return nil, &ManifestError{File: label, Err: err}
	}
	out, err := resources.AsYaml()
	if err != nil {
		return nil, &ManifestError{File: label, Err: err}
	}
	return decode(label, out)
}

// checkRemote refuses kustomizations (dir and the local bases it reaches)
// that refer to remote resources. Kustomize would clone them by running
// git, or download them, which a reconciler must not do behind its
// operator's back; the error says so instead.
func checkRemote(root *object.Tree, dir string, seen map[string]bool) error {
	if seen[dir] || dir == ".." || strings.HasPrefix(dir, "../") {
		return nil // cycles and escapes are kustomize's to report
	}
	seen[dir] = true
	t := root
	if dir != "." {
		var err error
		if t, err = root.Tree(dir); err != nil {
			return nil // a file, or missing: kustomize will say
		}
	}
	for _, name := range kustomizationFiles {
		f, err := t.File(name)
		if err != nil {
			continue
		}
		content, err := f.Contents()
		if err != nil {
			return err
		}
		var k map[string]any
		if yaml.Unmarshal([]byte(content), &k) != nil {
			return nil // kustomize will report the syntax error
		}
		bases, files := kustomizationRefs(k)
		for _, ref := range append(bases, files...) {
			if isRemote(ref) {
				return fmt.Errorf("%s: remote reference %q is not supported; copy it into the repository",
					path.Join(dir, name), ref)
			}
		}
		for _, b := range bases {
			if err := checkRemote(root, path.Join(dir, b), seen); err != nil {
				return err
			}
		}
		return nil
	}
	return nil
}

// kustomizationRefs lists the entries of a kustomization that name other
// kustomizations (bases) or files.
func kustomizationRefs(k map[string]any) (bases, files []string) {
	strs := func(v any) []string {
		var out []string
		switch v := v.(type) {
		case string:
			out = append(out, v)
		case []any:
			for _, e := range v {
				if s, ok := e.(string); ok {
					out = append(out, s)
				}
			}
		}
		return out
	}
	for _, key := range []string{"resources", "bases", "components", "generators", "transformers", "validators"} {
		bases = append(bases, strs(k[key])...)
	}
	for _, key := range []string{"crds", "configurations", "patchesStrategicMerge"} {
		files = append(files, strs(k[key])...)
	}
	if m, ok := k["openapi"].(map[string]any); ok {
		files = append(files, strs(m["path"])...)
	}
	for _, key := range []string{"patches", "patchesJson6902", "replacements", "configMapGenerator", "secretGenerator"} {
		list, _ := k[key].([]any)
		for _, e := range list {
			m, _ := e.(map[string]any)
			files = append(files, strs(m["path"])...)
			files = append(files, strs(m["env"])...)
			files = append(files, strs(m["envs"])...)
			for _, f := range strs(m["files"]) {
				_, after, found := strings.Cut(f, "=") // "key=path"
				if found {
					f = after
				}
				files = append(files, f)
			}
		}
	}
	return bases, files
}

var (
	schemeRE  = regexp.MustCompile(`^[a-z][a-z0-9+.-]*://`)
	scpUserRE = regexp.MustCompile(`^[a-z][a-z0-9-]*@`)
)

// isRemote reports whether kustomize would treat ref as a URL to download
// or a git repository to clone (mirroring its own detection).
func isRemote(ref string) bool {
	if strings.ContainsAny(ref, " \t\n") { // inline YAML, not a reference
		return false
	}
	l := strings.TrimPrefix(strings.ToLower(ref), "git::")
	return schemeRE.MatchString(l) || scpUserRE.MatchString(l) ||
		strings.HasPrefix(l, "github.com/") || strings.HasPrefix(l, "github.com:")
}
