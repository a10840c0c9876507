// Package oci reads artifacts from an OCI registry: it resolves a tag to a
// manifest digest with one HEAD request, fetches a manifest and one layer
// by digest, each bounded in size and verified against its digest, and
// tells which of the artifact formats recond renders a manifest is
// (artifact.go).
//
// A [Client] talks to one repository of one registry. It reads the
// registry's credentials (a dockerconfigjson file) and CA at every
// request batch, so both can be rotated without a restart; it follows the
// registry's bearer-token flow and basic auth (oras-go's auth.Client),
// speaks plain HTTP only when told to and only to a loopback host, and
// never sends the registry's credentials to another origin (a blob
// redirect to a storage host goes without them).
//
// Every failure is an *[Error] carrying its reason, decided where it is
// made: the registry's answer (401 and 403 auth, 404 not_found, 408 and 504
// timeout, 429 and 5xx unavailable), the network's, or an artifact that
// recond refuses (invalid).
//
// A [Source] is the source facade's kind of source for an oci:// URL
// (source.go): Fetch resolves the tag with one HEAD and pulls the
// manifest and its one content layer, each verified against its digest
// and bounded by the render limits, into a cache directory per digest,
// only when the digest is not cached (the newest few are kept); with
// Settings.VerifyArtifacts it refuses, with reason forbidden, an artifact
// without a cosign signature by a key of Settings.CosignKeysFile, once per
// digest and keys (verify.go, package cosign). Open unpacks the cached
// layer in memory into a tree.Mem (layer.go), refusing absolute paths,
// "..", hard links, devices, links that leave the tree, duplicates and
// anything over the limits, naming the entry (a *manifest.ManifestError); a
// cached layer that no longer matches its digest is the cache's fault (a
// *manifest.ReadError), and the next Fetch pulls it again.
package oci
