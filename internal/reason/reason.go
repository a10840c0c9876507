package reason

// Reason is the closed set of causes a failed phase is classified into.
type Reason string

// Every reason a failure can carry.
const (
	// Auth: credentials missing or refused (Git, a registry, SOPS keys).
	Auth Reason = "auth"
	// Forbidden: a request refused, by the API server's RBAC or by recond
	// itself (a signature that does not verify, a redirect it will not
	// follow, plain HTTP beyond loopback).
	Forbidden Reason = "forbidden"
	// NotFound: a ref, a tag, an object or a kind that does not exist.
	NotFound Reason = "not_found"
	// Invalid: input recond refuses (a manifest, an artifact, a write the
	// rules refuse).
	Invalid Reason = "invalid"
	// Conflict: another writer's object or a stale resource version.
	Conflict Reason = "conflict"
	// Timeout: the network or the server took too long.
	Timeout Reason = "timeout"
	// Unavailable: the network or the server could not be reached, or the
	// machine ran out of room.
	Unavailable Reason = "unavailable"
	// Other: anything not classified.
	Other Reason = "other"
	// Hook: a chart's hook failed or ran out of time.
	Hook Reason = "hook"
	// Immutable: the API server refused a change to a field that cannot
	// change once set.
	Immutable Reason = "immutable"
)

// All lists every Reason, so that labelled series can be pre-initialised.
var All = []Reason{
	Auth, Forbidden, NotFound, Invalid,
	Conflict, Timeout, Unavailable, Other, Hook, Immutable,
}

// Known reports whether r is one of All.
func Known(r Reason) bool {
	for _, k := range All {
		if k == r {
			return true
		}
	}
	return false
}
