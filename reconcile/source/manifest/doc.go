// Package manifest holds what a revision's render hands the loop and what
// both sides of a render worker's pipe know: the Manifest and its errors
// (ManifestError, LimitError, DecryptError, ReadError), the Limits a
// render is held to, and the age keys file as read for a render
// (ReadKeys, Fingerprint). It renders nothing: package render and the
// renderers above it do, in the render binary.
package manifest
