// Package cluster is recond's view of the Kubernetes API: a dynamic client
// bound to one namespace, a cached RESTMapper that refreshes itself when a
// kind is unknown, and the few calls the phases make (LIST by label, GET,
// server-side apply, delete). It is a leaf: it knows nothing of ticks.
package cluster
