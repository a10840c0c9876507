// Package source fetches Kubernetes manifests from a Git repository or an
// OCI registry and has them rendered into objects, for the reconciler to
// apply. It is the facade of the packages below it, and the only one its
// callers (the engine, the command) import.
//
// A [Source] is built from a [Config] with [New]. Each reconcile tick calls
// [Source.Fetch], which resolves the configured ref to a revision (a
// commit SHA, or an artifact's manifest digest), and then [Source.Render]
// with that revision, which reads the manifests from it. [Source.Moved]
// tells, while a render runs, whether the ref moved on.
//
// Where a revision comes from is a kind of source, a package of its own
// behind one small interface (fetcher: Fetch, Moved, Open, Failed), that
// the facade picks from its table of kinds by the URL (source.go):
//
//   - package git: a local path or file:// URL, read in place, or a remote
//     one (https://, http://, ssh://, git@host:path) kept as a bare clone
//     under Config.CacheDir, fetched in-process with go-git (no git binary
//     is run), shallowly and only when the ref moved; with
//     Config.VerifyCommits, a revision not signed by a key of
//     Config.TrustedKeysFile is refused (package git/signature, a
//     *[SignatureError]);
//   - package oci: oci://HOST/REPOSITORY, a tag or digest of a registry's
//     repository, pulled by digest into a verified cache; with
//     OCIOptions.VerifyArtifacts, an artifact without a cosign signature
//     by a trusted key is refused (package oci/cosign).
//
// Open gives the revision's files as a tree (package fetch: a tree.Dir,
// the revision's time, where the render binary opens it again), holding
// the source's cache until the render is done; the renderers read only
// through it, so every renderer runs over every kind of source under the
// same bounds, link rules and sealing: plain YAML and JSON files
// (package render), a kustomization (package kustomize) or a Helm chart
// (package helm). Every render runs in recond's render binary,
// recond-render (package renderer is its side of the pipe), started as a
// [Worker] process per render and killed at the render's deadline
// (Config.Worker; package worker): recond itself links none of the
// renderers. Config.Renderer, without a Worker, renders in the calling
// process (package renderer's InProcess), for the renderers' own tests.
// A render never opens a network connection or starts a process of its
// own, is bounded by [Limits], decrypts SOPS-encrypted files with the age
// keys of Config.SOPSAgeKeysFile (read by recond, passed on the render's
// pipe), and no error of it quotes a secret value.
//
// Credentials are read from files at every fetch, so they can be rotated
// without a restart, and never appear in errors or in
// [Source.DisplayURL]. The flags a user sets on a Source are bound by
// [Config.BindFlags] (each package binds its own: the limits, the
// registry's, the chart's) and the render worker's by
// [WorkerOptions.BindFlags].
//
// A failure to read the source (go-git, a registry, their transports, the
// network, the disk) leaves Fetch, Moved and Render as an *[Error] that
// carries its reason (auth, not_found, timeout, unavailable, forbidden,
// invalid), decided once where it is made, by the kind of source that
// made it; the loop reads it with errors.As, and the reason crosses the
// render binary's pipe with the error. Problems with the manifests
// themselves, limits included, are reported as *[ManifestError]. A render
// that failed for a reason that may be the cache's (an object it could
// not read) makes the next Fetch start afresh, once per revision.
package source
