package transient

import (
	"errors"
	"net"
	"net/url"
	"syscall"

	"recond.dev/recond/internal/reason"
)

// Reasons Reason returns, in the words of the loop's closed set.
const (
	Timeout     = string(reason.Timeout)
	Unavailable = string(reason.Unavailable)
)

// Reason returns Timeout or Unavailable for a failure of the network or
// the machine, and "" for any other error (a stopped context included: the
// caller knows why it stopped).
func Reason(err error) string {
	var (
		netErr net.Error
		urlErr *url.Error
		opErr  *net.OpError
	)
	switch {
	case err == nil:
		return ""
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		Exhausted(err):
		return Unavailable
	case errors.As(err, &netErr) && netErr.Timeout():
		return Timeout
	case errors.As(err, &opErr), errors.As(err, &urlErr):
		return Unavailable
	}
	return ""
}

// Exhausted reports whether err is the machine out of room: a full disk or
// quota, no file descriptor left. Like a server that is down it passes,
// but it is local: freeing what the process holds (a cache) may help.
func Exhausted(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) ||
		errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}
