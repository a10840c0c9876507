// Package tree holds the two interfaces through which a revision's files
// reach the renderers, Dir and File, and the trees that implement them
// without a source of their own: a file system (FSDir) and a directory
// held in memory (Mem, an unpacked archive).
//
// A source (a Git commit's tree, an OCI artifact's layer) provides a Dir;
// the renderers (plain YAML and JSON, kustomize, Helm) read only through
// it, so every renderer runs over every source under the same bounds,
// link rules and sealing. It is a leaf: it imports nothing of the project.
package tree
