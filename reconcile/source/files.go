package source

import (
	"io/fs"

	"recond.dev/recond/reconcile/source/tree"
)

// A revision's files reach the renderers through Dir and File only
// (package tree): this is the seam between where a revision comes from (a
// Git commit's tree, package git; an artifact's layer, package oci; any
// other source provides the same two interfaces) and how its files become objects (plain YAML and JSON,
// kustomize, Helm).

// Dir, File and their kinds are package tree's.
type (
	Dir       = tree.Dir
	File      = tree.File
	Entry     = tree.Entry
	EntryKind = tree.EntryKind
)

// The kinds of entries.
const (
	KindFile    = tree.KindFile
	KindDir     = tree.KindDir
	KindSymlink = tree.KindSymlink
	KindOther   = tree.KindOther
)

// FSDir presents a directory of fsys (the root: ".") as a Dir (tree.FSDir).
func FSDir(fsys fs.FS) Dir { return tree.FSDir(fsys) }
