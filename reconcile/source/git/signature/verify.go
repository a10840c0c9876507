package signature

import (
	"bytes"
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

// VerifyCommit checks that the commit c is signed by one of k. A refusal
// is an *Error naming c and its committer.
func (k *Keys) VerifyCommit(c *object.Commit) error {
	e := &Error{Commit: c.Hash.String(), Signer: identity(c.Committer)}
	e.KeyID, e.Err = k.verify(encoder(c.EncodeWithoutSignature), c.PGPSignature, c.Committer.When, true)
	if e.Err != nil {
		return e
	}
	return nil
}

// VerifyTag checks that the annotated tag t is signed by one of k: the
// tag's own signature, not its commit's. A refusal is an *Error naming the
// tag, commit (the commit the tag leads to) and the tagger.
func (k *Keys) VerifyTag(t *object.Tag, commit string) error {
	e := &Error{Commit: commit, Tag: t.Name, Signer: identity(t.Tagger)}
	e.KeyID, e.Err = k.verify(encoder(t.EncodeWithoutSignature), t.PGPSignature, t.Tagger.When, false)
	if e.Err != nil {
		return e
	}
	return nil
}

// Verify checks armored, a signature over payload made by an object that
// says it was made at signed, against k. It returns the key id the
// signature names ("" when it cannot be read) and why it is refused:
// ErrUnsigned when armored is blank, or a cause an *Error describes. An SSH
// signature (git's gpg.format=ssh) is checked against the SSH keys of k, in
// namespace "git" at signed; any other against the OpenPGP keys of k.
func (k *Keys) Verify(payload []byte, armored string, signed time.Time) (keyID string, err error) {
	return k.verify(func() ([]byte, error) { return payload, nil }, armored, signed, false)
}

// verify is Verify with the payload made only when needed. single refuses
// an OpenPGP signature of more than one block, as go-git's Commit.Verify
// does.
func (k *Keys) verify(payload func() ([]byte, error), armored string, signed time.Time, single bool) (keyID string, err error) {
	if strings.TrimSpace(armored) == "" {
		return "", ErrUnsigned
	}
	if sshsig.IsArmored([]byte(armored)) {
		return k.verifySSH(payload, armored, signed)
	}
	keyID = issuer(armored)
	if len(k.pgp) == 0 {
		return keyID, pgperrors.ErrUnknownIssuer
	}
	if single && signatureBlocks(armored) > 1 {
		return keyID, object.ErrMultipleSignatures
	}
	msg, err := payload()
	if err != nil {
		return keyID, err
	}
	if _, err := openpgp.CheckArmoredDetachedSignature(k.pgp, bytes.NewReader(msg), strings.NewReader(armored), nil); err != nil {
		return keyID, err
	}
	return keyID, nil
}

// verifySSH checks an armored SSH signature over the payload, signed at the
// date the object claims, against the allowed signers. It returns the
// key's fingerprint, "" when the signature cannot be read, and why the
// signature is refused.
func (k *Keys) verifySSH(payload func() ([]byte, error), armored string, signed time.Time) (keyID string, err error) {
	sig, err := sshsig.Parse([]byte(armored))
	if err != nil {
		return "", err
	}
	keyID = ssh.FingerprintSHA256(sig.Key)
	msg, err := payload()
	if err != nil {
		return keyID, fmt.Errorf("encode the signed object: %w", err)
	}
	_, err = sig.Verify(msg, sshsig.GitNamespace, k.ssh, signed)
	return keyID, err
}

// encoder is the payload that encode (an object's EncodeWithoutSignature)
// writes.
func encoder(encode func(plumbing.EncodedObject) error) func() ([]byte, error) {
	return func() ([]byte, error) {
		var obj plumbing.MemoryObject
		if err := encode(&obj); err != nil {
			return nil, err
		}
		r, err := obj.Reader()
		if err != nil {
			return nil, err
		}
		return io.ReadAll(r)
	}
}

// signatureBlocks counts the lines of armored that start a signature
// block, OpenPGP, X.509 or SSH, as go-git does.
func signatureBlocks(armored string) int {
	n := 0
	for line := range strings.Lines(armored) {
		for _, begin := range []string{
			"-----BEGIN PGP SIGNATURE-----", "-----BEGIN PGP MESSAGE-----",
			"-----BEGIN CERTIFICATE-----", "-----BEGIN SIGNED MESSAGE-----",
			"-----BEGIN SSH SIGNATURE-----",
		} {
			if strings.HasPrefix(line, begin) {
				n++
				break
			}
		}
	}
	return n
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
