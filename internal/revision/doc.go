// Package revision abbreviates the revisions recond shows: a Git commit's
// SHA, or an OCI artifact's manifest digest ("sha256:" and 64 hex digits),
// which keeps its algorithm so that the two never look alike.
package revision
