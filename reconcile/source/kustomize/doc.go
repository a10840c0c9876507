// Package kustomize builds a kustomization of a revision's files with the
// sealed kustomize (third_party/kustomize-api: no network, no processes,
// no plugins but the builtin ones), reading lazily through render's
// read-only, bounded file system mounted at render.Mount.
//
// Before kustomize runs, every kustomization reachable from the path is
// checked (check.go) so that an entry that is not a relative path inside
// the repository, a remote reference or a chart to download is refused
// naming the kustomization file and the entry; what a secretGenerator or a
// patch of a Secret brings is gathered as secret material, and each file
// is given the role SOPS decryption reads it as. A helmCharts entry is
// rendered by package helm, from the repository.
package kustomize
