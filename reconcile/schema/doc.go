// Package schema reads the OpenAPI v3 documents the API server publishes and
// tells, for a kind and a field path, whether the field is a resource
// quantity, an int-or-string or a duration: what the diff needs to compare
// values as the server canonicalises them, for built-in kinds and custom
// resources alike.
//
// Documents are fetched per group-version, on demand by Prepare, and cached:
// once every kind a tick compares is known, a tick costs no API call. A kind
// the cache does not know (a CRD installed since) makes Prepare re-read the
// server's list of documents, whose URLs carry a hash of each document, and
// fetch the ones that changed; Invalidate, or the cache's age, does the same
// for kinds already known (a CRD's schema updated).
package schema
