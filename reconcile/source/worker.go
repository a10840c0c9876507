package source

import (
	"context"

	"recond.dev/recond/reconcile/source/fetch"
	"recond.dev/recond/reconcile/source/render"
	"recond.dev/recond/reconcile/source/worker"
)

// A render worker (package worker) runs kustomize or a chart in a process
// of its own, killed at the render's deadline; these are its names as the
// source's callers know them.
type (
	// Worker runs a render in a process of its own (Config.Worker).
	Worker = worker.Worker
	// WorkerOptions are the render worker's settings, as flags.
	WorkerOptions = worker.Options
)

// DefaultWorkerMemory is the memory a render worker may use when
// Worker.MaxMemory is 0.
const DefaultWorkerMemory = worker.DefaultMemory

// Flag names of the render worker.
const (
	FlagRenderInProcess = worker.FlagRenderInProcess
	FlagRenderMaxMemory = worker.FlagRenderMaxMemory
)

// ErrRenderKilled is wrapped by the error of a render whose worker was
// killed because the render's context ended (its deadline, or a stop).
var ErrRenderKilled = worker.ErrRenderKilled

// RunWorkerIfAsked serves one render and exits when the process was
// started as a render worker; otherwise it returns at once. Call it first
// thing in main (and in TestMain of tests that render through a Worker).
// The worker opens the revision's tree with the Open of the kind of
// source that named it (kinds).
func RunWorkerIfAsked() {
	worker.RunIfAsked(worker.Sources{Open: openTree, Reason: withReason, ReadFault: readFault})
}

// renderInWorker builds the kustomization at s.dir of t (helm nil) or
// renders the chart there in the configured Worker's process, which opens
// t again where its source keeps it, and returns its YAML output.
func (s *Source) renderInWorker(ctx context.Context, t *fetch.Tree, b *render.Budget, label string, helm *helmRequest, chart bool) ([]byte, error) {
	return s.cfg.Worker.Render(ctx, worker.Job{Tree: t.Reopen, Rev: t.Rev, Dir: s.dir, Helm: helm, Chart: chart, Label: label}, b)
}
