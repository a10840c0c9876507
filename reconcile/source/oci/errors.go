package oci

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"

	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/errcode"

	"recond.dev/recond/internal/reason"
	"recond.dev/recond/internal/transient"
)

// The reasons an *Error carries (the loop's reasons of the same names).
const (
	ReasonAuth        = string(reason.Auth)
	ReasonNotFound    = string(reason.NotFound)
	ReasonInvalid     = string(reason.Invalid)
	ReasonTimeout     = string(reason.Timeout)
	ReasonUnavailable = string(reason.Unavailable)
	ReasonOther       = string(reason.Other)
	// ReasonForbidden is a request recond refuses to make: plain HTTP
	// beyond loopback, a redirect from https to http.
	ReasonForbidden = string(reason.Forbidden)
)

// Error is a failure to read from the registry, or an artifact refused,
// with its reason.
type Error struct {
	Reason string
	Err    error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// invalidf is an artifact refused: what the registry served is not
// something recond reads, or breaks a bound.
func invalidf(format string, args ...any) error {
	return &Error{Reason: ReasonInvalid, Err: withoutQueries(fmt.Errorf(format, args...))}
}

// classify gives err (from oras-go, net/http or the network) its reason,
// and a message without the query of any URL it quotes.
func classify(err error) error {
	var e *Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &e):
		return withoutQueries(err)
	}
	return &Error{Reason: reasonOf(err), Err: withoutQueries(err)}
}

// urlQuery is the query (and fragment) of a URL an error quotes: after a
// redirect, a storage host's presigned URL carries its credentials there
// (X-Amz-Signature=, sig=).
var urlQuery = regexp.MustCompile(`(\bhttps?://[^\s"'?#]*)[?#][^\s"']*`)

// withoutQueries is err, its message cut of every URL's query.
func withoutQueries(err error) error {
	msg := err.Error()
	if cut := urlQuery.ReplaceAllString(msg, "$1?…"); cut != msg {
		return &scrubbed{msg: cut, err: err}
	}
	return err
}

// scrubbed is an error shown with another message, its causes kept for
// errors.Is and errors.As.
type scrubbed struct {
	msg string
	err error
}

func (e *scrubbed) Error() string { return e.msg }
func (e *scrubbed) Unwrap() error { return e.err }

func reasonOf(err error) string {
	var resp *errcode.ErrorResponse
	switch {
	case errors.As(err, &resp):
		switch code := resp.StatusCode; {
		case code == http.StatusUnauthorized || code == http.StatusForbidden:
			return ReasonAuth
		case code == http.StatusNotFound:
			return ReasonNotFound
		case code == http.StatusRequestTimeout || code == http.StatusGatewayTimeout:
			return ReasonTimeout
		case code == http.StatusTooManyRequests || code >= 500:
			return ReasonUnavailable
		}
		return ReasonOther
	case errors.Is(err, auth.ErrBasicCredentialNotFound):
		// The registry asked for credentials that the file has not.
		return ReasonAuth
	case errors.Is(err, errdef.ErrNotFound):
		return ReasonNotFound
	case errors.Is(err, errdef.ErrSizeExceedsLimit):
		return ReasonInvalid
	}
	if r := transient.Reason(err); r != "" {
		return r
	}
	return ReasonOther
}

// Classify gives err, from a request to the registry, its reason (an
// *Error; err itself when it already is one).
func Classify(err error) error { return classify(err) }
