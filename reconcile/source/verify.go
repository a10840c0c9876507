package source

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	pgperrors "github.com/ProtonMail/go-crypto/openpgp/errors"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"golang.org/x/crypto/ssh"

	"recond.dev/recond/reconcile/source/sshsig"
)

// ErrUnsigned is the cause in a *SignatureError for a commit or tag that
// carries no signature at all.
var ErrUnsigned = errors.New("no signature")

// SignatureError says that a revision is not signed by a key of
// Config.TrustedKeysFile, so Fetch refused it: it is neither rendered nor
// applied. Err is ErrUnsigned; for an OpenPGP signature, an error of
// github.com/ProtonMail/go-crypto/openpgp/errors (ErrUnknownIssuer for a key
// that is not trusted, a SignatureError when the signature does not match);
// for an SSH signature, an error of package sshsig (ErrUnknownKey for a key
// that is not trusted, ErrNotAllowed for one whose allowed-signers lines do
// not let it sign in namespace "git" at the committer's (or tagger's) date,
// ErrBadSignature when the signature does not match, ErrMalformed,
// ErrUnsupported); or another reason the signature could not be checked.
type SignatureError struct {
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

func (e *SignatureError) Error() string {
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

func (e *SignatureError) Unwrap() error { return e.Err }

func (e *SignatureError) keyID() string {
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

// verify checks that rev is signed by a trusted key: the annotated tag the
// ref named, if it named one, otherwise the commit itself. An SSH signature
// (git's gpg.format=ssh) is checked against the SSH keys of the keys file,
// any other against its OpenPGP keys. The keys file is read on every call,
// so keys can be rotated without a restart.
func (s *Source) verify(rev Revision) error {
	keys, err := readTrustedKeys(s.cfg.TrustedKeysFile)
	if err != nil {
		return err
	}
	repo, err := s.open()
	if err != nil {
		return err
	}
	tip := rev.tip
	if tip.IsZero() {
		tip = plumbing.NewHash(rev.SHA)
	}
	obj, err := repo.Object(plumbing.AnyObject, tip)
	if err != nil {
		return fmt.Errorf("verify %s: %w", tip, err)
	}
	se := &SignatureError{Commit: rev.SHA}
	var armored string
	var check func(string) (*openpgp.Entity, error)
	var payload func(plumbing.EncodedObject) error
	var signed time.Time
	switch o := obj.(type) {
	case *object.Tag:
		se.Tag, se.Signer = o.Name, identity(o.Tagger)
		armored, check, payload, signed = o.PGPSignature, o.Verify, o.EncodeWithoutSignature, o.Tagger.When
	case *object.Commit:
		se.Signer = identity(o.Committer)
		armored, check, payload, signed = o.PGPSignature, o.Verify, o.EncodeWithoutSignature, o.Committer.When
	default:
		return fmt.Errorf("verify %s: a %s cannot be signed", tip, obj.Type())
	}
	if strings.TrimSpace(armored) == "" {
		se.Err = ErrUnsigned
		return se
	}
	if sshsig.IsArmored([]byte(armored)) {
		if se.KeyID, se.Err = verifySSH(armored, payload, keys.ssh, signed); se.Err != nil {
			return se
		}
		return nil
	}
	se.KeyID = issuer(armored)
	if keys.pgp == "" {
		se.Err = pgperrors.ErrUnknownIssuer
		return se
	}
	if _, err := check(keys.pgp); err != nil {
		se.Err = err
		return se
	}
	return nil
}

// verifySSH checks an armored SSH signature over the object that payload
// encodes without its signature, signed at the date the object claims,
// against the allowed signers. It returns the key's fingerprint, "" when
// the signature cannot be read, and why the signature is refused.
func verifySSH(armored string, payload func(plumbing.EncodedObject) error, allowed *sshsig.AllowedSigners, signed time.Time) (keyID string, err error) {
	sig, err := sshsig.Parse([]byte(armored))
	if err != nil {
		return "", err
	}
	keyID = ssh.FingerprintSHA256(sig.Key)
	var obj plumbing.MemoryObject
	if err := payload(&obj); err != nil {
		return keyID, fmt.Errorf("encode the signed object: %w", err)
	}
	r, err := obj.Reader()
	if err != nil {
		return keyID, err
	}
	msg, err := io.ReadAll(r)
	if err != nil {
		return keyID, err
	}
	_, err = sig.Verify(msg, sshsig.GitNamespace, allowed, signed)
	return keyID, err
}

func identity(sig object.Signature) string {
	return sig.Name + " <" + sig.Email + ">"
}

// issuer returns the key id an armored signature names, "" when it cannot
// be read.
func issuer(armored string) string {
	block, err := armor.Decode(strings.NewReader(armored))
	if err != nil {
		return ""
	}
	p, err := packet.NewReader(block.Body).Next()
	if err != nil {
		return ""
	}
	if sig, ok := p.(*packet.Signature); ok && sig.IssuerKeyId != nil {
		return fmt.Sprintf("%016X", *sig.IssuerKeyId)
	}
	return ""
}
