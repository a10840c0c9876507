// Package reason holds the closed set of causes a failure is classified
// into: the one vocabulary the loop's phases, the sources (Git, OCI), the
// decryptor, the write rules and the network classifier report in, and
// that metrics, spans, logs and Events label with.
//
// It is a leaf: it imports nothing of the project, so any package may
// make its errors carry a Reason where they fail (an *Error).
package reason
