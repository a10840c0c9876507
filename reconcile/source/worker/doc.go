// Package worker runs a render (kustomize, or a chart) in a process of its
// own, recond's executable re-executed, confined and killed at the render's
// deadline (Worker): a render that computes for ever, or grows without
// end, cannot hold the long-lived process's CPU, memory or locks.
//
// The parent sends a Job: where the revision's source keeps its tree (a
// fetch.Location), the directory, what a chart needs and the age keys of
// the render's budget. The worker (RunIfAsked, first thing in main) sets
// its own limits, opens the tree with the Open of the kind of source that
// named it (Sources, which the source facade lists), renders it under the
// same sealed file system and limits as an in-process render, and answers
// on a pipe: the output, or the error with what callers ask of it (its
// reason, a manifest's file and object, a limit, a read of the source's
// cache that failed, a setup of its own that failed: SetupError).
package worker
