// Package record holds the vocabulary of a tick's result that metrics,
// spans, logs, Events and the status page read: the phases and outcomes,
// a phase's result and error, object references, health, counts, what
// observing cost, and how a difference is written on one line. Pure: no
// I/O.
package record
