package transient

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"
)

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestReason(t *testing.T) {
	refused := &url.Error{Op: "Get", URL: "https://h", Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
	for _, tc := range []struct {
		name      string
		err       error
		want      string
		exhausted bool
	}{
		{"nil", nil, "", false},
		{"refused", fmt.Errorf("fetch: %w", refused), Unavailable, false},
		{"reset", syscall.ECONNRESET, Unavailable, false},
		{"no route", syscall.EHOSTUNREACH, Unavailable, false},
		{"network down", syscall.ENETUNREACH, Unavailable, false},
		{"disk full", &os.PathError{Op: "write", Path: "/c/x", Err: syscall.ENOSPC}, Unavailable, true},
		{"quota", syscall.EDQUOT, Unavailable, true},
		{"no file descriptor", fmt.Errorf("open: %w", syscall.EMFILE), Unavailable, true},
		{"no file descriptor in the system", syscall.ENFILE, Unavailable, true},
		{"timeout", &net.OpError{Op: "read", Net: "tcp", Err: timeoutErr{}}, Timeout, false},
		{"dial failed", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("no such host")}, Unavailable, false},
		{"stopped", context.Canceled, "", false},
		{"anything else", errors.New("boom"), "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Reason(tc.err); got != tc.want {
				t.Errorf("Reason(%v) = %q, want %q", tc.err, got, tc.want)
			}
			if got := Exhausted(tc.err); got != tc.exhausted {
				t.Errorf("Exhausted(%v) = %v, want %v", tc.err, got, tc.exhausted)
			}
		})
	}
}
