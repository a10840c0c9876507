// Package source fetches Kubernetes manifests from a Git repository and
// renders them into objects, for the reconciler to apply.
//
// A [Source] is built from a [Config] with [New]. Each reconcile tick calls
// [Source.Fetch], which resolves the configured ref to a commit SHA, and then
// [Source.Render] with that SHA, which reads the manifests from the commit.
//
// Fetching is done in-process with go-git; no git binary is run.
//
//   - A local path or file:// URL is opened in place; the ref is resolved in
//     that repository and nothing is copied.
//   - A remote URL (https://, http://, ssh:// or scp-like git@host:path) is
//     kept as a bare clone under Config.CacheDir. Each Fetch first lists the
//     remote refs (like git ls-remote); only when the ref points at a commit
//     that is not in the cache yet does it fetch, shallowly (depth 1) and only
//     that ref. A ref given as a full 40-hex commit SHA needs no network at
//     all once the commit is cached; otherwise all branches and tags are
//     fetched in full to find it. A cache that looks broken is removed and
//     the fetch retried once from scratch.
//
// Credentials are read from files at every fetch, so they can be rotated
// without a restart, and never appear in errors or in [Source.DisplayURL].
//
// Rendering reads files straight from the commit's tree (no checkout). When
// the configured directory holds a kustomization, kustomize runs in-process
// on an in-memory copy of the commit (plugins disabled, loads restricted to
// the kustomization root, remote bases refused before kustomize could clone
// or download them). Otherwise every .yaml, .yml and .json file below the
// directory is decoded, in lexical path order: multi-document YAML and JSON,
// empty documents skipped, lists ("kind: List") expanded into their items.
// Hidden paths (such as .github/) and symbolic links are skipped. Problems
// with the manifests themselves are reported as *[ManifestError].
package source
