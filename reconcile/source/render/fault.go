package render

import (
	"context"
	"errors"

	"recond.dev/recond/internal/reason"
)

// Fault returns err as a *ManifestError (of label when it is not one
// already), except for cancellation, which is returned as it is.
func Fault(err error, label string) error {
	var (
		me *ManifestError
		se *reason.Error
		de *DecryptError
	)
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.As(err, &se) && errors.As(err, &de):
		return se // no key opens a SOPS file: reason auth, not the manifest's
	case errors.As(err, &me):
		return me
	}
	return &ManifestError{File: label, Err: err}
}

// InGoroutine runs build in a goroutine of its own and returns as soon as
// ctx is done; the build then goes on until it ends (a worker process is
// the way to stop one).
func InGoroutine(ctx context.Context, build func() ([]byte, error)) ([]byte, error) {
	type result struct {
		out []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := build()
		done <- result{out, err}
	}()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case res := <-done:
		return res.out, res.err
	}
}
