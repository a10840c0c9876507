// Package render turns a revision's files (a tree.Dir) into Kubernetes
// objects under bounds, and holds what every renderer shares: the
// Manifest and its errors (ManifestError, LimitError, DecryptError), the
// Limits and the Budget that counts one render against them, the sealed,
// read-only file system the renderers read through (FS: links followed
// only inside the tree, mounted at Mount), the plain reader of YAML and
// JSON files (Plain), SOPS decryption by what a file is read as (Role),
// and the secret material a render learns so that none of its errors
// quotes a secret value (Secrets, Budget.Safe).
//
// It never opens a network connection or starts a process, and knows no
// source: Git and OCI give it a tree.Dir; kustomize and Helm, above it,
// read through its FS.
package render
