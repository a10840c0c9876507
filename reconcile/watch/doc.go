// Package watch is a watch-fed cache of the objects recond owns in its
// namespace: the Live implementation behind --observe=watch.
//
// A Cache starts one informer per (kind, label selector) the first time it
// is asked for it: namespace-scoped, label-selected, with watch bookmarks,
// a randomised watch timeout and a jittered periodic relist, kept until the
// Cache is closed. List waits for that informer's first sync, then answers
// from memory without an API request. Get answers from the same store and
// falls back to one counted GET, because a label-selected store cannot tell
// an unowned object from a missing one.
//
// A watch can stall with its stream open: nothing arrives, no error
// either. An informer that has seen no event, bookmark or list for
// Options.StaleAfter is restarted by the List or Get that finds it so (a
// LIST, then a new watch), and that read waits for the new sync: a stall
// hides drift for StaleAfter at most, and a fresh informer's reads still
// cost nothing.
//
// The store keeps only what the diff reads: other managers' managedFields
// entries are cut to who, how and when (their field sets dropped), recond's
// own entries stay whole with their field sets kept as JSON text (read with
// diff.ManagedFields, not GetManagedFields), and the
// last-applied-configuration annotation is dropped. Status is kept.
//
// A watch can also lose events while its bookmarks still come, and look
// alive. Every Options.CheckEvery, each informer's store is compared with
// one LIST of the API server (names and resourceVersions); a store found
// behind is restarted as a stale one is, its missed changes handed on. An
// informer whose last list or watch request failed (the API server
// unreachable) does not vouch for its store: Generation says so, and List
// and Get ask the API server.
//
// Every change of a store (an add, update or delete, recond's own
// included) moves Generation and is journalled by name: Changes names the
// objects changed since a generation, and Object reads one of them from
// its store, so that a tick the watches ask for can read again what
// changed, not everything (reconcile's incremental tick).
//
// Updates and deletes by anyone but recond are handed to Options.OnEvent
// (an update whose only managedFields change is in recond's entries is
// recond's own; so are the delete of an object recond said it was
// deleting, Cache.Deleting, and its updates while it terminates). It is a
// leaf: it does not import package reconcile.
package watch
