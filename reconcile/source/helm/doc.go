// Package helm renders a Helm chart of a revision's files with Helm's
// engine, sealed: every file is read through render's bounded file system
// (links only inside the tree), dependencies only from the chart's
// charts/, lookup returns nothing, DNS is never asked, a values schema's
// $ref never leaves the chart, and the random and time functions are
// repeatable, keyed with the instance's seed and the revision's time
// (funcs.go). What a key or certificate maker generated is told apart by
// a second render with stand-ins (generated.go).
//
// Build renders a chart at a path; KustomizeChart renders a
// kustomization's helmCharts entry the same way. Neither runs a process
// nor opens a connection; the caller runs them in a worker process to
// bound their time and memory.
package helm
