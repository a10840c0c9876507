package sshsig

import (
	"errors"
	"strings"
)

var (
	// ErrMalformed is the cause of an error for a signature that is not an
	// armored SSHSIG blob of version 1.
	ErrMalformed = errors.New("malformed SSH signature")
	// ErrUnsupported is the cause of an error for a signature made with a
	// hash or signature algorithm that is refused (SHA-1 among them).
	ErrUnsupported = errors.New("unsupported SSH signature")
	// ErrUnknownKey is the cause of an error for a signature whose key is
	// not listed in the allowed signers.
	ErrUnknownKey = errors.New("the key is not an allowed signer")
	// ErrNotAllowed is the cause of an error for a signature whose key is
	// listed, but on no line that allows the namespace and the time; the
	// error is a *NotAllowedError.
	ErrNotAllowed = errors.New("the key is not allowed to sign this")
	// ErrBadSignature is the cause of an error for a signature that does
	// not verify over the message, or that was made for another namespace.
	ErrBadSignature = errors.New("bad signature")
)

// NotAllowedError says why no line that lists a signature's key allows
// it: one reason per line, in file order, each naming its line.
type NotAllowedError struct {
	Reasons []string
}

func (e *NotAllowedError) Error() string { return strings.Join(e.Reasons, "; ") }

// Is makes errors.Is(err, ErrNotAllowed) hold.
func (e *NotAllowedError) Is(target error) bool { return target == ErrNotAllowed }
