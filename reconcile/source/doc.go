// Package source fetches Kubernetes manifests from a Git repository or an
// OCI registry and renders them into objects, for the reconciler to apply.
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
// The flags a user sets on a Source are bound by [Config.BindFlags] (and
// the render worker's by [WorkerOptions.BindFlags]): a new setting is a
// field and a line here, not an edit in the command.
//
// A failure to read the source (go-git, its transports, the network, the
// disk) leaves Fetch, Moved and Render as an *[Error] that carries its
// reason (auth, not_found, timeout, unavailable), decided once where it is
// made (giterrors.go: reasonOf is the one list of go-git's errors); the
// loop reads it with errors.As, and the reason crosses the render worker's
// pipe with the error.
//
// Where a revision's files come from and how they become objects are two
// seams: renderers read only through [Dir] and [File] (files.go), which a
// Git commit's tree implements, and so does any file tree ([FSDir]).
//
// Rendering reads files straight from the commit's tree (no checkout). When
// the configured directory holds a Chart.yaml, the chart is rendered with
// Helm's engine (helm.go: sealed, repeatable, in the same Worker as
// kustomize; see docs/helm.md). When it holds a kustomization, kustomize runs, in a
// [Worker] process killed at the render's deadline when Config.Worker is set
// (in-process otherwise); otherwise every .yaml, .yml and .json file below the directory is
// decoded, in lexical path order: multi-document YAML and JSON, empty
// documents skipped, lists ("kind: List") expanded into their items. Hidden
// paths (such as .github/) are skipped.
//
// Rendering is sealed: it never opens a network connection and never starts
// a process, whatever the repository holds. Kustomize is a fork
// (third_party/kustomize-api) with its HTTP loader, git cloner, helm and
// exec/Go/function plugins replaced by errors; it reads through a
// read-only file system backed lazily by the commit's tree and mounted at
// /repo, so a path that climbs above the repository is outside the mount
// and fails instead of being clamped to the root. Before kustomize runs,
// every kustomization reachable from the path is checked (with kustomize's
// own types, deprecated fields included) so that an entry that is not a
// relative path inside the repository, or a helm chart, is refused with a
// message naming the kustomization file and the entry.
//
// Symbolic links are followed inside the tree (at most 40 hops): a link to
// a file is read under the link's name; a link that leads outside the
// repository, dangles or (in the plain reader) leads to a directory fails
// the render, naming it, as does any file that cannot be read.
//
// Rendering is bounded by [Limits] (zero fields take [DefaultLimits]): bytes
// read from the tree and bytes rendered (MaxBytes), objects (MaxObjects),
// one file's size, checked from the tree before reading (MaxFileBytes), the
// nesting depth of one object (MaxDepth), and YAML alias expansion of every
// YAML file read (MaxAliasExpansion times the document's own nodes plus a
// small allowance; counted on unexpanded yaml.v3 nodes). Exceeding one
// fails with a *[LimitError] naming the limit and its flag. A number that a
// decoded object cannot hold exactly (an integer outside int64, a float
// with more digits than float64 keeps) fails, naming the file, the object
// and the field. Render returns as soon as its context is done: a worker is
// killed (ErrRenderKilled); in-process, the file system stops kustomize at
// its next read, and a build that computes without reading runs on.
//
// Problems with the manifests themselves, limits included, are reported as
// *[ManifestError].
//
// No error of a render quotes a Secret's value (secrets.go): the checks
// that look at a Secret (a secretGenerator's literals, env files and files,
// checked before kustomize runs; a Secret's keys and numbers) name the
// file, the object and the key only, and every value the render knows to
// be secret (Secrets' data and stringData, generators' sources, patches of
// Secrets, and any document marked secret as a whole, as a decrypted one
// will be) is removed from whatever error leaves the render, kustomize's
// own included, wherever the render runs. The display URL has no user
// information, query or fragment, and fetch errors lose the query too.
//
// SOPS-encrypted files (age keys of Config.SOPSAgeKeysFile, read at every
// render) are decrypted as they are read, in-process with package sops
// (decrypt.go; docs/secrets.md): Secret manifests, a secretGenerator's
// sources and Helm values files; any other encrypted file fails with
// reason invalid, and one no key opens with reason auth (an *Error
// wrapping a *DecryptError that names the file and its recipients). The
// MAC is always verified. [Source.SensitiveValues] tells the values a
// render decrypted that are secret wherever a template copies them.
//
// A Config.URL oci://HOST/REPOSITORY is a registry's repository (oci.go,
// package oci; docs/oci.md): the ref is a tag or a sha256 digest, and the
// revision the manifest's digest ("sha256:..."). Fetch resolves a tag with
// one manifest HEAD and pulls the manifest and its one content layer (by
// media type: a Flux artifact, a Helm chart, a plain artifact of one
// tar+gzip layer), each verified against its digest and bounded by the
// render limits, into a cache directory per digest, only when the digest
// is not cached. Render unpacks the layer in memory into a Dir
// (artifact.go), refusing absolute paths, "..", hard links, devices, links
// that leave the tree, duplicates and anything over the limits, naming the
// entry (a *ManifestError), and renders it like a Git tree. A cached layer
// that no longer matches its digest is the cache's fault: the next Fetch
// pulls it again. The registry's failures are an *Error with their reason
// (unavailable, timeout, auth, not_found, invalid); with
// OCIOptions.VerifyArtifacts, an artifact without a cosign signature by a
// key of OCIOptions.CosignKeysFile (package cosign) is refused with reason
// forbidden, once per digest and keys.
//
// With Config.VerifyCommits, Fetch refuses a revision whose commit (or, when
// the ref names an annotated tag, whose tag) is not signed by a key of
// Config.TrustedKeysFile, cached or not, with a *[SignatureError] naming the
// commit and the signer's key id: such a revision is never rendered. The
// keys file (read at every fetch) holds armored OpenPGP public keys, SSH
// keys as allowed-signers lines (ssh-keygen's ALLOWED SIGNERS format), or
// both; package git/signature parses it and checks the signature, OpenPGP
// as go-git's Verify does, SSH (git's gpg.format=ssh) with package sshsig,
// over the object without its signature, in namespace "git", at the
// committer's (or tagger's) date as the object states it, as git
// verify-commit does; an SSH key's id is its SHA256 fingerprint.
package source
