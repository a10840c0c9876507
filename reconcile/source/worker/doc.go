// Package worker runs a render in a process of its own: recond's render
// binary (recond-render, package renderer), confined and killed at the
// render's deadline (Worker). A render that computes for ever, or grows
// without end, cannot hold the long-lived process's CPU, memory or locks;
// and the long-lived process links none of the renderers (kustomize, Helm,
// SOPS), so it maps only the loop.
//
// recond sends a Job: where the revision's source keeps its tree (a
// fetch.Location), the directory, what a chart needs, the render's limits
// and the age keys as recond read them. The render binary (ReadRequest)
// sets its own limits, opens the tree with the Open of the kind of source
// that named it, renders it, and answers on a pipe (WriteAnswer): the
// objects, as JSON, with what the loop keeps of the render (the decrypted
// values that are secret, a chart's name and what it left out), or the
// error with what callers ask of it (its reason, a manifest's file and
// object, a limit, a read of the source's cache that failed, a setup of
// its own that failed: SetupError). At start recond asks the binary for
// its build and the pipe's Protocol (Worker.Check) and refuses one of
// another build.
//
// This package is recond's side of the pipe, and the pipe's format; it
// imports no renderer.
package worker
