// Package git fetches a Git repository's revisions in-process with go-git
// (no git binary is run) and opens a commit's tree for rendering.
//
//   - A local path or file:// URL is opened in place; the ref is resolved in
//     that repository and nothing is copied.
//   - A remote URL (https://, http://, ssh:// or scp-like git@host:path) is
//     kept as a bare clone under Options.CacheDir. Each Fetch first lists the
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
// A failure to read the repository (go-git, its transports, the network,
// the disk) is a *reason.Error that carries its reason (auth, not_found,
// timeout, unavailable), decided once where it is made: [ReasonOf]
// (errors.go) is the one list of go-git's errors.
package git
