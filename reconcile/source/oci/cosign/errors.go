package cosign

import (
	"errors"
	"fmt"
)

var (
	// ErrUnsigned is the cause of an *Error for an artifact with no cosign
	// signature in either place: no signature tag and no Sigstore bundle
	// among its referrers.
	ErrUnsigned = errors.New("no cosign signature")
	// ErrUnknownKey is the cause of an *Error for an artifact whose
	// signatures verify with none of the keys given. KeyID then names the
	// key a signature claims, when it claims one (a bundle's key hint, the
	// key of a certificate), and is "" otherwise: a signature without such
	// a claim that verifies with no key given was made with another key,
	// or altered, and the two cannot be told apart.
	ErrUnknownKey = errors.New("not signed by a trusted key")
	// ErrOtherDigest is the cause of an *Error for a signature made with a
	// key given whose signed payload names another digest: a signature
	// copied from another artifact.
	ErrOtherDigest = errors.New("signature is for another digest")
	// ErrBadSignature is the cause of an *Error for a signature that
	// claims a key given but does not verify with it, one that verifies
	// but whose payload is not what cosign signs for an image (another
	// type, an attestation, unreadable), or a signature artifact the
	// registry serves broken: larger than the bounds, not matching its
	// digest, missing, not JSON.
	ErrBadSignature = errors.New("bad signature")
)

// Error is a verification that failed: no signature of the artifact is
// made with a key given and names its digest. Err wraps one of
// ErrUnsigned, ErrUnknownKey, ErrOtherDigest and ErrBadSignature (and, for
// a signature artifact that the registry served broken, the cause: such as
// oras-go's content.ErrMismatchedDigest), with the details of the most
// telling signature refused: a copied signature rather than a broken one,
// a broken one rather than one by an unknown key.
type Error struct {
	// Digest is the digest of the artifact's manifest, "sha256:<hex>".
	Digest string
	// KeyID is the id of the key concerned: the key given that made a
	// signature refused, or the key a signature claims (see ErrUnknownKey);
	// "" when none can be named.
	KeyID string
	Err   error
}

func (e *Error) Error() string {
	if e.KeyID == "" {
		if errors.Is(e.Err, ErrUnsigned) {
			return fmt.Sprintf("cosign: %s: %v", e.Digest, e.Err)
		}
		return fmt.Sprintf("cosign: %s (key unknown): %v", e.Digest, e.Err)
	}
	return fmt.Sprintf("cosign: %s (key %s): %v", e.Digest, e.KeyID, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }
