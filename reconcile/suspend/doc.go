// Package suspend holds the rules of an operator's suspension of an
// instance's writes, as the annotations of its inventory ConfigMap hold it
// (recond.dev/suspended-until, -reason, -by: keys in reconcile/keys): how
// they are read (an end missing, unreadable or too far is --suspend-max
// from when it was first seen, and is written back), what a request to
// suspend or resume may ask (a reason, a length between MinSuspend and
// --suspend-max, one line of printable text), and the annotations that
// write or remove one. It is pure: the engine (package reconcile) reads
// and patches the ConfigMap, and the write gate holds the writes.
package suspend
