package fetch

// Revision is the outcome of a Fetch.
type Revision struct {
	// SHA is the full hex SHA of the commit the ref resolved to, or for an
	// OCI source the manifest's digest ("sha256:" and 64 hex digits).
	SHA string
	// Fetched is false when no objects were fetched over the network: the
	// repository is local, or the commit was already in the cache.
	Fetched bool
	// Tip is the object the ref named, in the source's own words (a Git
	// annotated tag's hash, or the commit's); "" when it is SHA itself.
	// A source compares it to tell whether the ref moved.
	Tip string
}
