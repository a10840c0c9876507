// Package failure holds the vocabulary of a failed phase: the engine's
// errors (invalid input, another instance's objects, a wave's refused
// objects, a lost Lease, a stop, an abandoned or panicking phase, the
// tick's timeout) and Classify, which maps any error once into the closed
// set of reasons (internal/reason). Pure: it reads errors, never the
// engine's state.
package failure
