// Package decorate holds what the read phase does to every rendered object
// before any phase sees it: recond's ownership labels and provenance
// annotations (a hook's labels apart), the server's fields removed, the
// fields that hold a decrypted value marked, and the checks of an object's
// identity (no decrypted value in a name; what a reserved name is kept
// for). Pure: no I/O.
package decorate
