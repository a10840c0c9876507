// Package optout holds the per-object opt-outs: the annotations an object
// carries in Git (and, for recond.dev/reconcile and recond.dev/prune, on
// the live object too) that take it, or some of its fields, out of the
// loop's hands. It checks their values (a value it does not know is an
// error, never ignored), removes the fields recond.dev/ignore-fields
// names, says which objects a tick leaves alone and why, and holds the
// patch that orphans an object. It is pure: the engine (package reconcile)
// reads the objects and makes the writes. The annotation keys are in
// reconcile/keys.
package optout
