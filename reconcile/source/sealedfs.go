package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/kustomize/kyaml/filesys"

	"recond.dev/recond/reconcile/source/tree"
)

// mount is where the commit's tree appears in the file system given to
// kustomize. It is not "/" so that a path climbing above the repository
// resolves outside the mount, and fails, instead of being clamped to the
// root.
const mount = "/repo"

// maxSymlinkHops bounds the symbolic links followed to resolve one path.
const maxSymlinkHops = 40

// errOutside marks a path or link that leads outside the repository.
var errOutside = errors.New("outside the repository")

// node is a resolved path in the tree: a directory (tree set) or a file.
type node struct {
	path string // repository-relative, "." for the root
	tree Dir
	file File
}

// resolver resolves repository-relative paths in a revision's files,
// following symbolic links that stay inside them.
type resolver struct{ root Dir }

// resolve looks up p (slash-separated, relative to the repository root).
// The error names the link when a symbolic link dangles or leads outside.
func (r *resolver) resolve(p string) (*node, error) {
	p = path.Clean(p)
	if p == ".." || strings.HasPrefix(p, "../") || path.IsAbs(p) {
		return nil, fmt.Errorf("%s: %w", p, errOutside)
	}
	hops := 0
	cur := &node{path: ".", tree: r.root}
	rest := splitPath(p)
	pending := 0   // components of rest that come from the last link's target
	lastLink := "" // that link, for errors
	for len(rest) > 0 {
		name := rest[0]
		rest = rest[1:]
		fromLink := pending > 0
		if pending > 0 {
			pending--
		}
		full := path.Join(cur.path, name)
		if cur.tree == nil {
			return nil, fmt.Errorf("%s: not a directory: %w", cur.path, fs.ErrNotExist)
		}
		e, err := cur.tree.Entry(name)
		if err != nil {
			if fromLink {
				return nil, fmt.Errorf("symlink %s: dangling: %s does not exist", lastLink, full)
			}
			return nil, fmt.Errorf("%s: %w", full, fs.ErrNotExist)
		}
		switch e.Kind {
		case KindDir:
			t, err := cur.tree.Dir(name)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", full, err)
			}
			cur = &node{path: full, tree: t}
		case KindSymlink:
			if hops++; hops > maxSymlinkHops {
				return nil, fmt.Errorf("symlink %s: too many levels of symbolic links", full)
			}
			f, err := cur.tree.File(name)
			if err != nil {
				return nil, fmt.Errorf("symlink %s: %w", full, err)
			}
			// A link's target is a path: a blob longer than any path is
			// refused unread.
			if f.Size() > maxSymlinkTarget {
				return nil, fmt.Errorf("symlink %s: target of %d bytes is longer than a path (%d)", full, f.Size(), maxSymlinkTarget)
			}
			target, err := tree.ReadAll(f)
			if err != nil {
				return nil, fmt.Errorf("symlink %s: %w", full, err)
			}
			lastLink = full + " -> " + target
			t := path.Join(cur.path, target)
			if path.IsAbs(target) || t == ".." || strings.HasPrefix(t, "../") {
				return nil, fmt.Errorf("symlink %s: %w", lastLink, errOutside)
			}
			// Start again from the root with the target and what is left.
			parts := splitPath(t)
			rest = append(parts, rest...)
			pending += len(parts)
			cur = &node{path: ".", tree: r.root}
		case KindFile:
			f, err := cur.tree.File(name)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", full, err)
			}
			cur = &node{path: full, file: f}
		default: // a submodule: its content is not in this repository
			return nil, fmt.Errorf("%s: submodule: %w", full, fs.ErrNotExist)
		}
	}
	return cur, nil
}

func splitPath(p string) []string {
	if p == "." || p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// treeFS is the file system kustomize sees: the commit's tree, read
// lazily, mounted at mount, read-only. Every operation checks ctx, and
// every read is charged to the render's budget. The first fault that is
// not an ordinary "does not exist" (a path outside the repository, a bad
// link, a limit, cancellation) is remembered, because kustomize turns some
// errors into "not found" and retries other forms of a path: Err gives the
// real reason.
type treeFS struct {
	ctx context.Context
	r   *resolver
	b   *budget

	mu    sync.Mutex
	fault error
}

var _ filesys.FileSystem = (*treeFS)(nil)

func newTreeFS(ctx context.Context, root Dir, b *budget) *treeFS {
	return &treeFS{ctx: ctx, r: &resolver{root: root}, b: b}
}

// Err is the first fault seen, or nil.
func (f *treeFS) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fault
}

func (f *treeFS) record(err error) error {
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return err
	}
	f.mu.Lock()
	if f.fault == nil {
		f.fault = err
	}
	f.mu.Unlock()
	return err
}

// rel maps an absolute path in the mount to a repository-relative path.
func (f *treeFS) rel(p string) (string, error) {
	if err := f.ctx.Err(); err != nil {
		return "", f.record(err)
	}
	if !filepath.IsAbs(p) {
		p = path.Join(mount, p)
	}
	p = path.Clean(filepath.ToSlash(p))
	if p == mount {
		return ".", nil
	}
	r, ok := strings.CutPrefix(p, mount+"/")
	if !ok {
		return "", f.record(&ManifestError{File: p, Err: fmt.Errorf("path %w", errOutside)})
	}
	return r, nil
}

func (f *treeFS) lookup(p string) (*node, error) {
	r, err := f.rel(p)
	if err != nil {
		return nil, err
	}
	n, err := f.r.resolve(r)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, f.record(&ManifestError{File: r, Err: err})
	}
	return n, nil
}

// abs maps a repository-relative path back into the mount.
func abs(rel string) string { return path.Join(mount, rel) }

// read returns the content of a file node, charged to the budget and
// checked for alias bombs and depth.
func (f *treeFS) read(n *node) ([]byte, error) { return f.readAs(n, true) }

// readFileRaw is ReadFile without decryption: a chart's files are the
// chart's as committed (a template that reads a SOPS-encrypted file with
// .Files.Get reads its ciphertext); only its values files are decrypted.
func (f *treeFS) readFileRaw(p string) ([]byte, error) {
	n, err := f.lookup(p)
	if err != nil {
		return nil, err
	}
	return f.readAs(n, false)
}

// readAs is read, decrypting a SOPS-encrypted file when decrypt is set.
func (f *treeFS) readAs(n *node, decrypt bool) ([]byte, error) {
	if n.file == nil {
		return nil, fmt.Errorf("%s: is a directory", n.path)
	}
	data, err := f.b.readFile(n.path, n.file)
	if err != nil {
		return nil, f.record(err)
	}
	if decrypt {
		if data, err = f.b.decrypt(n.path, data); err != nil {
			return nil, f.record(err)
		}
	}
	if err := f.ctx.Err(); err != nil {
		return nil, f.record(err)
	}
	// Kustomize parses most of what it reads as YAML: refuse bombs and
	// inexact numbers before it does (its output has lost the literal).
	// What is not YAML (env files, binary data) is left alone.
	if err := f.b.inspect(n.path, data, true); err != nil {
		var se *syntaxError
		if !errors.As(err, &se) {
			return nil, f.record(err)
		}
	}
	return data, nil
}

// ReadFile implements filesys.FileSystem.
func (f *treeFS) ReadFile(p string) ([]byte, error) {
	n, err := f.lookup(p)
	if err != nil {
		return nil, err
	}
	return f.read(n)
}

// Open implements filesys.FileSystem; the file is read-only.
func (f *treeFS) Open(p string) (filesys.File, error) {
	n, err := f.lookup(p)
	if err != nil {
		return nil, err
	}
	data, err := f.read(n)
	if err != nil {
		return nil, err
	}
	return &roFile{Reader: bytes.NewReader(data), info: info(n)}, nil
}

// IsDir implements filesys.FileSystem.
func (f *treeFS) IsDir(p string) bool {
	n, err := f.lookup(p)
	return err == nil && n.tree != nil
}

// Exists implements filesys.FileSystem.
func (f *treeFS) Exists(p string) bool {
	_, err := f.lookup(p)
	return err == nil
}

// ReadDir implements filesys.FileSystem.
func (f *treeFS) ReadDir(p string) ([]string, error) {
	n, err := f.lookup(p)
	if err != nil {
		return nil, err
	}
	if n.tree == nil {
		return nil, fmt.Errorf("%s: not a directory", p)
	}
	entries := n.tree.Entries()
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name)
	}
	return names, nil
}

// CleanedAbs implements filesys.FileSystem. The path is checked to resolve
// inside the repository but is returned as written (cleaned): a symbolic
// link is read under its own name, so kustomize's root restriction applies
// to where the link is, as for the plain reader.
func (f *treeFS) CleanedAbs(p string) (filesys.ConfirmedDir, string, error) {
	n, err := f.lookup(p)
	if err != nil {
		return "", "", err
	}
	r, _ := f.rel(p)
	if n.tree != nil {
		return filesys.ConfirmedDir(abs(r)), "", nil
	}
	return filesys.ConfirmedDir(abs(path.Dir(r))), path.Base(r), nil
}

// Glob implements filesys.FileSystem, matching one path component at a
// time.
func (f *treeFS) Glob(pattern string) ([]string, error) {
	r, err := f.rel(pattern)
	if err != nil {
		return nil, err
	}
	matches := []string{"."}
	for _, part := range splitPath(r) {
		var next []string
		for _, m := range matches {
			n, err := f.r.resolve(m)
			if err != nil || n.tree == nil {
				continue
			}
			for _, e := range n.tree.Entries() {
				if ok, err := path.Match(part, e.Name); err != nil {
					return nil, err
				} else if ok {
					next = append(next, path.Join(m, e.Name))
				}
			}
		}
		matches = next
	}
	out := make([]string, 0, len(matches))
	for _, m := range matches {
		if m != "." {
			out = append(out, abs(m))
		}
	}
	sort.Strings(out)
	return out, nil
}

// Walk implements filesys.FileSystem. Symbolic links are reported, not
// followed, as filepath.Walk does.
func (f *treeFS) Walk(p string, fn filepath.WalkFunc) error {
	n, err := f.lookup(p)
	if err != nil {
		return fn(p, nil, err)
	}
	return f.walk(p, n, fn)
}

func (f *treeFS) walk(p string, n *node, fn filepath.WalkFunc) error {
	if err := f.ctx.Err(); err != nil {
		return f.record(err)
	}
	if err := fn(p, info(n), nil); err != nil {
		if errors.Is(err, filepath.SkipDir) {
			return nil
		}
		return err
	}
	if n.tree == nil {
		return nil
	}
	for _, e := range n.tree.Entries() {
		cp := path.Join(p, e.Name)
		var ch *node
		switch e.Kind {
		case KindDir:
			t, err := n.tree.Dir(e.Name)
			if err != nil {
				return err
			}
			ch = &node{path: path.Join(n.path, e.Name), tree: t}
		default:
			fl, err := n.tree.File(e.Name)
			if err != nil {
				continue
			}
			ch = &node{path: path.Join(n.path, e.Name), file: fl}
		}
		if err := f.walk(cp, ch, fn); err != nil {
			return err
		}
	}
	return nil
}

func (f *treeFS) readOnly(op, p string) error {
	return f.record(&ManifestError{File: p, Err: fmt.Errorf("%s: the repository is read-only while rendering", op)})
}

// Create implements filesys.FileSystem: always refused.
func (f *treeFS) Create(p string) (filesys.File, error) { return nil, f.readOnly("create", p) }

// Mkdir implements filesys.FileSystem: always refused.
func (f *treeFS) Mkdir(p string) error { return f.readOnly("mkdir", p) }

// MkdirAll implements filesys.FileSystem: always refused.
func (f *treeFS) MkdirAll(p string) error { return f.readOnly("mkdir", p) }

// RemoveAll implements filesys.FileSystem: always refused.
func (f *treeFS) RemoveAll(p string) error { return f.readOnly("remove", p) }

// WriteFile implements filesys.FileSystem: always refused.
func (f *treeFS) WriteFile(p string, _ []byte) error { return f.readOnly("write", p) }

// roFile is an opened file: readable, not writable.
type roFile struct {
	*bytes.Reader
	info os.FileInfo
}

func (r *roFile) Write([]byte) (int, error) { return 0, errors.New("read-only file") }
func (r *roFile) Close() error              { return nil }
func (r *roFile) Stat() (os.FileInfo, error) {
	return r.info, nil
}

// fileInfo describes a node.
type fileInfo struct{ n *node }

func info(n *node) os.FileInfo { return fileInfo{n} }

func (i fileInfo) Name() string { return path.Base(i.n.path) }
func (i fileInfo) Size() int64 {
	if i.n.file != nil {
		return i.n.file.Size()
	}
	return 0
}
func (i fileInfo) Mode() os.FileMode {
	if i.n.tree != nil {
		return os.ModeDir | 0o555
	}
	return 0o444
}
func (i fileInfo) ModTime() time.Time { return time.Time{} }
func (i fileInfo) IsDir() bool        { return i.n.tree != nil }
func (i fileInfo) Sys() any           { return nil }
