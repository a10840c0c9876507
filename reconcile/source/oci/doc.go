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
package oci
