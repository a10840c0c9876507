package render

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

// Mount is where the commit's tree appears in the file system given to
// kustomize (FS). It is not "/" so that a path climbing above the repository
// resolves outside the Mount, and fails, instead of being clamped to the
// root.
const Mount = "/repo"

// ErrOutside marks a path or link that leads outside the repository.
var ErrOutside = tree.ErrOutside

// Node is a resolved path in the tree: a directory (Dir set) or a file.
type Node = tree.Node

// FS is the file system kustomize and the chart renderer see: the
// commit's tree, read lazily, mounted at Mount, read-only. Every operation checks ctx, and
// every read is charged to the render's budget. The first fault that is
// not an ordinary "does not exist" (a path outside the repository, a bad
// link, a limit, cancellation) is remembered, because kustomize turns some
// errors into "not found" and retries other forms of a path: Err gives the
// real reason.
type FS struct {
	ctx context.Context
	r   *tree.Resolver
	b   *Budget

	mu    sync.Mutex
	fault error
}

var _ filesys.FileSystem = (*FS)(nil)

// NewFS returns the file system of the tree root, whose reads are charged
// to b and fail once ctx is done.
func NewFS(ctx context.Context, root tree.Dir, b *Budget) *FS {
	return &FS{ctx: ctx, r: tree.NewResolver(root), b: b}
}

// Err is the first fault seen, or nil.
func (f *FS) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fault
}

// Resolve looks up p, a repository-relative path, following symbolic links
// that stay inside the tree, without remembering a fault (the caller says
// what is wrong).
func (f *FS) Resolve(p string) (*Node, error) { return f.r.Resolve(p) }

// Context is the render's context: once it is done, every operation fails.
func (f *FS) Context() context.Context { return f.ctx }

// Budget is the render's budget, which every read is charged to.
func (f *FS) Budget() *Budget { return f.b }

func (f *FS) record(err error) error {
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

// rel maps an absolute path in the Mount to a repository-relative path.
func (f *FS) rel(p string) (string, error) {
	if err := f.ctx.Err(); err != nil {
		return "", f.record(err)
	}
	if !filepath.IsAbs(p) {
		p = path.Join(Mount, p)
	}
	p = path.Clean(filepath.ToSlash(p))
	if p == Mount {
		return ".", nil
	}
	r, ok := strings.CutPrefix(p, Mount+"/")
	if !ok {
		return "", f.record(&ManifestError{File: p, Err: fmt.Errorf("path %w", ErrOutside)})
	}
	return r, nil
}

// Lookup resolves p, a path in the mount, to its node; a fault that is
// not an ordinary "does not exist" is remembered (Err).
func (f *FS) Lookup(p string) (*Node, error) {
	r, err := f.rel(p)
	if err != nil {
		return nil, err
	}
	n, err := f.r.Resolve(r)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, f.record(&ManifestError{File: r, Err: err})
	}
	return n, nil
}

// abs maps a repository-relative path back into the Mount.
func Abs(rel string) string { return path.Join(Mount, rel) }

// Read returns the content of a file node, charged to the budget,
// decrypted when it is SOPS-encrypted (by its roles) and checked for
// alias bombs and depth.
func (f *FS) Read(n *Node) ([]byte, error) { return f.readAs(n, true) }

// ReadRaw is ReadFile without decryption: a chart's files are the
// chart's as committed (a template that reads a SOPS-encrypted file with
// .Files.Get reads its ciphertext); only its values files are decrypted.
func (f *FS) ReadRaw(p string) ([]byte, error) {
	n, err := f.Lookup(p)
	if err != nil {
		return nil, err
	}
	return f.readAs(n, false)
}

// readAs is read, decrypting a SOPS-encrypted file when decrypt is set.
func (f *FS) readAs(n *Node, decrypt bool) ([]byte, error) {
	if n.File == nil {
		return nil, fmt.Errorf("%s: is a directory", n.Path)
	}
	data, err := f.b.ReadFile(n.Path, n.File)
	if err != nil {
		return nil, f.record(err)
	}
	if decrypt {
		if data, err = f.b.Decrypt(n.Path, data); err != nil {
			return nil, f.record(err)
		}
	}
	if err := f.ctx.Err(); err != nil {
		return nil, f.record(err)
	}
	// Kustomize parses most of what it reads as YAML: refuse bombs and
	// inexact numbers before it does (its output has lost the literal).
	// What is not YAML (env files, binary data) is left alone.
	if err := f.b.Inspect(n.Path, data, true); err != nil {
		var se *syntaxError
		if !errors.As(err, &se) {
			return nil, f.record(err)
		}
	}
	return data, nil
}

// ReadFile implements filesys.FileSystem.
func (f *FS) ReadFile(p string) ([]byte, error) {
	n, err := f.Lookup(p)
	if err != nil {
		return nil, err
	}
	return f.Read(n)
}

// Open implements filesys.FileSystem; the file is read-only.
func (f *FS) Open(p string) (filesys.File, error) {
	n, err := f.Lookup(p)
	if err != nil {
		return nil, err
	}
	data, err := f.Read(n)
	if err != nil {
		return nil, err
	}
	return &roFile{Reader: bytes.NewReader(data), info: info(n)}, nil
}

// IsDir implements filesys.FileSystem.
func (f *FS) IsDir(p string) bool {
	n, err := f.Lookup(p)
	return err == nil && n.Dir != nil
}

// Exists implements filesys.FileSystem.
func (f *FS) Exists(p string) bool {
	_, err := f.Lookup(p)
	return err == nil
}

// ReadDir implements filesys.FileSystem.
func (f *FS) ReadDir(p string) ([]string, error) {
	n, err := f.Lookup(p)
	if err != nil {
		return nil, err
	}
	if n.Dir == nil {
		return nil, fmt.Errorf("%s: not a directory", p)
	}
	entries := n.Dir.Entries()
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
func (f *FS) CleanedAbs(p string) (filesys.ConfirmedDir, string, error) {
	n, err := f.Lookup(p)
	if err != nil {
		return "", "", err
	}
	r, _ := f.rel(p)
	if n.Dir != nil {
		return filesys.ConfirmedDir(Abs(r)), "", nil
	}
	return filesys.ConfirmedDir(Abs(path.Dir(r))), path.Base(r), nil
}

// Glob implements filesys.FileSystem, matching one path component at a
// time.
func (f *FS) Glob(pattern string) ([]string, error) {
	r, err := f.rel(pattern)
	if err != nil {
		return nil, err
	}
	matches := []string{"."}
	for _, part := range tree.SplitPath(r) {
		var next []string
		for _, m := range matches {
			n, err := f.r.Resolve(m)
			if err != nil || n.Dir == nil {
				continue
			}
			for _, e := range n.Dir.Entries() {
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
			out = append(out, Abs(m))
		}
	}
	sort.Strings(out)
	return out, nil
}

// Walk implements filesys.FileSystem. Symbolic links are reported, not
// followed, as filepath.Walk does.
func (f *FS) Walk(p string, fn filepath.WalkFunc) error {
	n, err := f.Lookup(p)
	if err != nil {
		return fn(p, nil, err)
	}
	return f.walk(p, n, fn)
}

func (f *FS) walk(p string, n *Node, fn filepath.WalkFunc) error {
	if err := f.ctx.Err(); err != nil {
		return f.record(err)
	}
	if err := fn(p, info(n), nil); err != nil {
		if errors.Is(err, filepath.SkipDir) {
			return nil
		}
		return err
	}
	if n.Dir == nil {
		return nil
	}
	for _, e := range n.Dir.Entries() {
		cp := path.Join(p, e.Name)
		var ch *Node
		switch e.Kind {
		case tree.KindDir:
			t, err := n.Dir.Dir(e.Name)
			if err != nil {
				return err
			}
			ch = &Node{Path: path.Join(n.Path, e.Name), Dir: t}
		default:
			fl, err := n.Dir.File(e.Name)
			if err != nil {
				continue
			}
			ch = &Node{Path: path.Join(n.Path, e.Name), File: fl}
		}
		if err := f.walk(cp, ch, fn); err != nil {
			return err
		}
	}
	return nil
}

func (f *FS) readOnly(op, p string) error {
	return f.record(&ManifestError{File: p, Err: fmt.Errorf("%s: the repository is read-only while rendering", op)})
}

// Create implements filesys.FileSystem: always refused.
func (f *FS) Create(p string) (filesys.File, error) { return nil, f.readOnly("create", p) }

// Mkdir implements filesys.FileSystem: always refused.
func (f *FS) Mkdir(p string) error { return f.readOnly("mkdir", p) }

// MkdirAll implements filesys.FileSystem: always refused.
func (f *FS) MkdirAll(p string) error { return f.readOnly("mkdir", p) }

// RemoveAll implements filesys.FileSystem: always refused.
func (f *FS) RemoveAll(p string) error { return f.readOnly("remove", p) }

// WriteFile implements filesys.FileSystem: always refused.
func (f *FS) WriteFile(p string, _ []byte) error { return f.readOnly("write", p) }

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
type fileInfo struct{ n *Node }

func info(n *Node) os.FileInfo { return fileInfo{n} }

func (i fileInfo) Name() string { return path.Base(i.n.Path) }
func (i fileInfo) Size() int64 {
	if i.n.File != nil {
		return i.n.File.Size()
	}
	return 0
}
func (i fileInfo) Mode() os.FileMode {
	if i.n.Dir != nil {
		return os.ModeDir | 0o555
	}
	return 0o444
}
func (i fileInfo) ModTime() time.Time { return time.Time{} }
func (i fileInfo) IsDir() bool        { return i.n.Dir != nil }
func (i fileInfo) Sys() any           { return nil }

// ResolveDir resolves p in root (tree.ResolveDir).
func ResolveDir(root tree.Dir, p string) (tree.Dir, error) { return tree.ResolveDir(root, p) }
