// Package renderer is the render binary's (recond-render's) whole job: it
// turns a worker.Job into a worker.Result, opening the revision's tree
// with the Open of the kind of source that named it (kinds), and rendering
// a chart (package helm), a kustomization (package kustomize) or plain
// files (package render), SOPS-decrypted as they are read. Serve is the
// binary's side of the pipe (RunIfAsked, first thing in its main); InProcess
// renders in the calling process, for the renderers' own tests and tools.
//
// recond itself never imports this package: the daemon links only the
// loop, and renders through worker.Worker.
package renderer
