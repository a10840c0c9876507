// Package fetch is what every kind of source hands the source facade: the
// Revision a fetch resolved the configured ref to, and a revision's files
// opened for rendering (Tree). A source (Git, an OCI registry) is a package
// of its own that speaks these types; the facade composes them behind one
// small interface and never asks which kind it holds.
package fetch
