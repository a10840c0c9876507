package worker

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
)

// Flag names of the render worker.
const (
	FlagRenderInProcess = "render-in-process"
	FlagRenderMaxMemory = "render-max-memory"
)

// Options are the render worker's settings, as flags.
type Options struct {
	// InProcess runs kustomize inside recond's own process (no Worker).
	InProcess bool
	// MaxMemory is Worker.MaxMemory.
	MaxMemory int64
}

// BindFlags registers the options' flags on fs, with their defaults.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.BoolVar(&o.InProcess, FlagRenderInProcess, false,
		"run kustomize inside recond's process instead of a worker process killed at the tick's deadline "+
			"(a render that never ends then holds the process until it restarts)")
	fs.Int64Var(&o.MaxMemory, FlagRenderMaxMemory, DefaultMemory,
		"most bytes of memory a render worker may use (keep it below the container's memory limit)")
}

// Validate checks the options.
func (o Options) Validate() error {
	if o.MaxMemory < 64<<20 {
		return fmt.Errorf("--%s must be at least 64 MiB (67108864)", FlagRenderMaxMemory)
	}
	return nil
}

// Worker returns the Worker the options ask for, recond's own executable
// re-executed, or nil when rendering is in-process.
func (o Options) Worker(log *slog.Logger) (*Worker, error) {
	if o.InProcess {
		return nil, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, errors.New("the render worker needs recond's own executable: " + err.Error() +
			" (or set --" + FlagRenderInProcess + ")")
	}
	return &Worker{Path: exe, MaxMemory: o.MaxMemory, Log: log}, nil
}
