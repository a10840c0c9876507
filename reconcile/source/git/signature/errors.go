package signature

import (
	"errors"
	"fmt"

	pgperrors "github.com/ProtonMail/go-crypto/openpgp/errors"

	"recond.dev/recond/reconcile/source/sshsig"
)

// ErrUnsigned is the cause in an *Error for a commit or tag that carries no
// signature at all.
var ErrUnsigned = errors.New("no signature")

// Error says that a commit or tag is not signed by a trusted key (of
// --trusted-keys-file), so it must be neither rendered nor applied. Err is
// ErrUnsigned; for an OpenPGP signature, an error of
// github.com/ProtonMail/go-crypto/openpgp/errors (ErrUnknownIssuer for a key
// that is not trusted, a SignatureError when the signature does not match);
// for an SSH signature, an error of package sshsig (ErrUnknownKey for a key
// that is not trusted, ErrNotAllowed for one whose allowed-signers lines do
// not let it sign in namespace "git" at the committer's (or tagger's) date,
// ErrBadSignature when the signature does not match, ErrMalformed,
// ErrUnsupported); or another reason the signature could not be checked.
type Error struct {
	// Commit is the full SHA of the commit the ref resolved to.
	Commit string
	// Tag is the name of the annotated tag whose signature was checked, ""
	// when the commit's own signature was.
	Tag string
	// KeyID names the signing key as the signature does: an OpenPGP key's
	// 64-bit id in upper-case hex, or an SSH key's SHA256 fingerprint as
	// ssh-keygen -l prints it ("SHA256:..."); "" when unsigned or
	// unreadable.
	KeyID string
	// Signer is the committer (or tagger) the object claims, "Name <email>":
	// what the author of the revision says, not a verified identity.
	Signer string
	Err    error
}

func (e *Error) Error() string {
	what := "commit " + shortSHA(e.Commit)
	if e.Tag != "" {
		what = fmt.Sprintf("tag %q (commit %s)", e.Tag, shortSHA(e.Commit))
	}
	by := fmt.Sprintf("%q", e.Signer)
	switch {
	case errors.Is(e.Err, ErrUnsigned):
		return fmt.Sprintf("%s by %s is unsigned; --verify-commits accepts only signatures by keys in --trusted-keys-file", what, by)
	case errors.Is(e.Err, pgperrors.ErrUnknownIssuer), errors.Is(e.Err, sshsig.ErrUnknownKey):
		return fmt.Sprintf("%s by %s is signed by key %s which is not in --trusted-keys-file", what, by, e.keyID())
	case errors.Is(e.Err, sshsig.ErrNotAllowed):
		return fmt.Sprintf("%s by %s is signed by key %s, but --trusted-keys-file does not allow that key here: %v", what, by, e.keyID(), e.Err)
	}
	return fmt.Sprintf("%s by %s: signature by key %s does not verify: %v", what, by, e.keyID(), e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

func (e *Error) keyID() string {
	if e.KeyID == "" {
		return "(unknown)"
	}
	return e.KeyID
}

func shortSHA(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}
