package worker

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
)

// Flag names of the render worker.
const (
	FlagRenderBinary    = "render-binary"
	FlagRenderInProcess = "render-in-process"
	FlagRenderMaxMemory = "render-max-memory"
)

// Binary is the render binary's file name, looked for beside recond's own
// executable when --render-binary is not set.
const Binary = "recond-render"

// Options are the render worker's settings, as flags.
type Options struct {
	// Binary is the render binary (--render-binary); "" is Binary beside
	// recond's own executable.
	Binary string
	// InProcess is the retired --render-in-process: recond links no
	// renderer, so it can only render in its render binary (Validate
	// refuses it, saying so).
	InProcess bool
	// MaxMemory is Worker.MaxMemory.
	MaxMemory int64
}

// BindFlags registers the options' flags on fs, with their defaults.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Binary, FlagRenderBinary, "",
		"the render binary recond starts for every render (default: "+Binary+" beside recond's own executable); "+
			"it must be of recond's own build")
	fs.BoolVar(&o.InProcess, FlagRenderInProcess, false,
		"retired: recond renders only in its render binary, a process of its own killed at the tick's deadline")
	fs.Int64Var(&o.MaxMemory, FlagRenderMaxMemory, DefaultMemory,
		"most bytes of memory a render worker may use (keep it below the container's memory limit)")
}

// Validate checks the options.
func (o Options) Validate() error {
	if o.InProcess {
		return fmt.Errorf("--%s is retired: recond does not link the renderers (kustomize, Helm, SOPS), "+
			"so that each instance maps only the loop; every render runs in the render binary (--%s)", FlagRenderInProcess, FlagRenderBinary)
	}
	if o.MaxMemory < 64<<20 {
		return fmt.Errorf("--%s must be at least 64 MiB (67108864)", FlagRenderMaxMemory)
	}
	return nil
}

// Worker returns the Worker the options ask for, once its binary is found
// and answers with build as its own and the pipe's Protocol: a binary
// missing, not executable or of another build is refused with an error
// that says which.
func (o Options) Worker(ctx context.Context, build string, log *slog.Logger) (*Worker, error) {
	path := o.Binary
	if path == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("the render binary is looked for beside recond's own executable: %w (or set --%s)", err, FlagRenderBinary)
		}
		path = filepath.Join(filepath.Dir(exe), Binary)
	}
	w := &Worker{Path: path, MaxMemory: o.MaxMemory, Log: log}
	if err := w.Check(ctx, build); err != nil {
		return nil, err
	}
	return w, nil
}

// ErrBinary is wrapped by the error of a render binary that is missing,
// not executable, or of another build than recond's.
var ErrBinary = errors.New("the render binary")
