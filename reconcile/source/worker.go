package source

import (
	"context"

	"recond.dev/recond/reconcile/source/worker"
)

// Every render runs in recond's render binary (package worker starts it;
// package renderer is the binary's side); these are its names as the
// source's callers know them.
type (
	// Worker runs a render in the render binary, a process of its own
	// (Config.Worker).
	Worker = worker.Worker
	// WorkerOptions are the render worker's settings, as flags.
	WorkerOptions = worker.Options
	// Job is one render; Result what it gave.
	Job    = worker.Job
	Result = worker.Result
)

// Renderer renders a revision's tree: the render binary (*Worker), or a
// renderer in the calling process (package renderer's InProcess, for the
// renderers' own tests and tools).
type Renderer interface {
	Render(ctx context.Context, job Job) (*Result, error)
}

// DefaultWorkerMemory is the memory a render worker may use when
// Worker.MaxMemory is 0.
const DefaultWorkerMemory = worker.DefaultMemory

// Flag names of the render worker.
const (
	FlagRenderBinary    = worker.FlagRenderBinary
	FlagRenderInProcess = worker.FlagRenderInProcess
	FlagRenderMaxMemory = worker.FlagRenderMaxMemory
)

// ErrRenderKilled is wrapped by the error of a render whose worker was
// killed because the render's context ended (its deadline, or a stop).
var ErrRenderKilled = worker.ErrRenderKilled
