// Package verdict holds what the API server has said of desired objects,
// remembered between ticks: that one is equivalent to a live object (the
// result of applying it, found unchanged, or shown by a dry run to change
// nothing), and that a create was accepted by a validating dry run. A Book
// is plain data keyed by the engine's object keys: it does no I/O and
// takes no lock; the engine keeps one in its memory, behind the memory's
// mutex.
package verdict
