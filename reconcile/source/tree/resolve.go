package tree

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
)

// ErrOutside marks a path or link that leads outside the repository.
var ErrOutside = errors.New("outside the repository")

// Node is a resolved path in the tree: a directory (Dir set) or a file.
type Node struct {
	Path string // repository-relative, "." for the root
	Dir  Dir
	File File
}

// maxSymlinkHops bounds the symbolic links followed to resolve one path.
const maxSymlinkHops = 40

// Resolver resolves repository-relative paths in a revision's files,
// following symbolic links that stay inside them.
type Resolver struct{ root Dir }

// NewResolver resolves paths in root.
func NewResolver(root Dir) *Resolver { return &Resolver{root: root} }

// Resolve looks up p (slash-separated, relative to the repository root).
// The error names the link when a symbolic link dangles or leads outside.
func (r *Resolver) Resolve(p string) (*Node, error) {
	p = path.Clean(p)
	if p == ".." || strings.HasPrefix(p, "../") || path.IsAbs(p) {
		return nil, fmt.Errorf("%s: %w", p, ErrOutside)
	}
	hops := 0
	cur := &Node{Path: ".", Dir: r.root}
	rest := SplitPath(p)
	pending := 0   // components of rest that come from the last link's target
	lastLink := "" // that link, for errors
	for len(rest) > 0 {
		name := rest[0]
		rest = rest[1:]
		fromLink := pending > 0
		if pending > 0 {
			pending--
		}
		full := path.Join(cur.Path, name)
		if cur.Dir == nil {
			return nil, fmt.Errorf("%s: not a directory: %w", cur.Path, fs.ErrNotExist)
		}
		e, err := cur.Dir.Entry(name)
		if err != nil {
			if fromLink {
				return nil, fmt.Errorf("symlink %s: dangling: %s does not exist", lastLink, full)
			}
			return nil, fmt.Errorf("%s: %w", full, fs.ErrNotExist)
		}
		switch e.Kind {
		case KindDir:
			t, err := cur.Dir.Dir(name)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", full, err)
			}
			cur = &Node{Path: full, Dir: t}
		case KindSymlink:
			if hops++; hops > maxSymlinkHops {
				return nil, fmt.Errorf("symlink %s: too many levels of symbolic links", full)
			}
			f, err := cur.Dir.File(name)
			if err != nil {
				return nil, fmt.Errorf("symlink %s: %w", full, err)
			}
			// A link's target is a path: a blob longer than any path is
			// refused unread.
			if f.Size() > MaxLinkTarget {
				return nil, fmt.Errorf("symlink %s: target of %d bytes is longer than a path (%d)", full, f.Size(), MaxLinkTarget)
			}
			target, err := ReadAll(f)
			if err != nil {
				return nil, fmt.Errorf("symlink %s: %w", full, err)
			}
			lastLink = full + " -> " + target
			t := path.Join(cur.Path, target)
			if path.IsAbs(target) || t == ".." || strings.HasPrefix(t, "../") {
				return nil, fmt.Errorf("symlink %s: %w", lastLink, ErrOutside)
			}
			// Start again from the root with the target and what is left.
			parts := SplitPath(t)
			rest = append(parts, rest...)
			pending += len(parts)
			cur = &Node{Path: ".", Dir: r.root}
		case KindFile:
			f, err := cur.Dir.File(name)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", full, err)
			}
			cur = &Node{Path: full, File: f}
		default: // a submodule: its content is not in this repository
			return nil, fmt.Errorf("%s: submodule: %w", full, fs.ErrNotExist)
		}
	}
	return cur, nil
}

// SplitPath is p's components ("." and "" have none).
func SplitPath(p string) []string {
	if p == "." || p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// ResolveDir resolves p (slash-separated, relative to root) in root,
// following symbolic links that stay inside it: the directory there, or
// nil when p is a file.
func ResolveDir(root Dir, p string) (Dir, error) {
	n, err := NewResolver(root).Resolve(p)
	if err != nil {
		return nil, err
	}
	return n.Dir, nil
}
