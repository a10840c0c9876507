package sshsig

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"

	"golang.org/x/crypto/ssh"
)

const (
	armorBegin = "-----BEGIN SSH SIGNATURE-----"
	armorEnd   = "-----END SSH SIGNATURE-----"
	magic      = "SSHSIG"
	version    = 1

	// MaxSignatureBytes bounds an armored signature (one by a 16384-bit
	// RSA key is about 6 KiB).
	MaxSignatureBytes = 64 << 10

	// GitNamespace is the namespace git signs commits and tags in.
	GitNamespace = "git"
)

// Signature is a parsed SSH signature.
type Signature struct {
	// Key is the signer's public key, as the signature names it.
	Key ssh.PublicKey
	// Namespace is what the signature is for ("git", "file", ...).
	Namespace string
	// HashAlgorithm hashed the message: "sha256" or "sha512" for any
	// signature that verifies.
	HashAlgorithm string
	// Sig is the signature over the signed data.
	Sig *ssh.Signature
}

// IsArmored reports whether s, less leading white space, starts with the
// armor of an SSH signature.
func IsArmored(s []byte) bool {
	return bytes.HasPrefix(bytes.TrimLeft(s, " \t\r\n"), []byte(armorBegin))
}

// Parse reads an armored SSH signature: the header line, the base64 blob
// (white space ignored), the footer line, and nothing else but white space
// around them. Errors wrap ErrMalformed, or ErrUnsupported for a version
// above 1 or a key that is a certificate.
func Parse(armored []byte) (*Signature, error) {
	if len(armored) > MaxSignatureBytes {
		return nil, fmt.Errorf("%w: %d bytes, more than the limit of %d", ErrMalformed, len(armored), MaxSignatureBytes)
	}
	s := bytes.TrimSpace(armored)
	body, ok := bytes.CutPrefix(s, []byte(armorBegin))
	if !ok {
		return nil, fmt.Errorf("%w: it does not start with %q", ErrMalformed, armorBegin)
	}
	if body, ok = bytes.CutSuffix(body, []byte(armorEnd)); !ok {
		return nil, fmt.Errorf("%w: it does not end with %q", ErrMalformed, armorEnd)
	}
	if len(body) < 2 || body[0] != '\n' && !bytes.HasPrefix(body, []byte("\r\n")) || body[len(body)-1] != '\n' {
		return nil, fmt.Errorf("%w: the armor lines are not lines of their own", ErrMalformed)
	}
	b64 := bytes.Map(func(r rune) rune {
		if r == ' ' || r == '\t' || r == '\r' || r == '\n' {
			return -1
		}
		return r
	}, body)
	blob := make([]byte, base64.StdEncoding.DecodedLen(len(b64)))
	n, err := base64.StdEncoding.Decode(blob, b64)
	if err != nil {
		return nil, fmt.Errorf("%w: the armored blob is not valid base64: %v", ErrMalformed, err)
	}
	return parseBlob(blob[:n])
}

// parseBlob reads the SSHSIG blob of PROTOCOL.sshsig: magic, version,
// public key, namespace, reserved, hash algorithm, signature.
func parseBlob(blob []byte) (*Signature, error) {
	rest, ok := bytes.CutPrefix(blob, []byte(magic))
	if !ok {
		return nil, fmt.Errorf("%w: the blob does not start with %q", ErrMalformed, magic)
	}
	if len(rest) < 4 {
		return nil, fmt.Errorf("%w: the blob ends before its version", ErrMalformed)
	}
	switch v := binary.BigEndian.Uint32(rest); {
	case v > version:
		return nil, fmt.Errorf("%w: version %d, newer than the supported %d", ErrUnsupported, v, version)
	case v != version:
		return nil, fmt.Errorf("%w: version %d, want %d", ErrMalformed, v, version)
	}
	r := reader{rest[4:]}
	keyBytes, err := r.string("public key")
	if err != nil {
		return nil, err
	}
	namespace, err := r.string("namespace")
	if err != nil {
		return nil, err
	}
	if _, err := r.string("reserved field"); err != nil { // ignored, as PROTOCOL.sshsig says
		return nil, err
	}
	hashAlg, err := r.string("hash algorithm")
	if err != nil {
		return nil, err
	}
	sigBytes, err := r.string("signature")
	if err != nil {
		return nil, err
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the signature", ErrMalformed, len(r.b))
	}
	key, err := ssh.ParsePublicKey(keyBytes)
	if err != nil {
		return nil, fmt.Errorf("%w: public key: %v", ErrMalformed, err)
	}
	if _, ok := key.(*ssh.Certificate); ok {
		return nil, fmt.Errorf("%w: signed with a certificate (%s); only plain keys are supported", ErrUnsupported, key.Type())
	}
	if len(namespace) == 0 {
		return nil, fmt.Errorf("%w: empty namespace", ErrMalformed)
	}
	sig := new(ssh.Signature)
	if err := ssh.Unmarshal(sigBytes, sig); err != nil {
		return nil, fmt.Errorf("%w: signature: %v", ErrMalformed, err)
	}
	return &Signature{Key: key, Namespace: string(namespace), HashAlgorithm: string(hashAlg), Sig: sig}, nil
}

// reader reads the SSH wire encoding (RFC 4251) of a blob.
type reader struct{ b []byte }

// string reads a string: a 32-bit length, then that many bytes, all of
// which must be in the blob.
func (r *reader) string(what string) ([]byte, error) {
	if len(r.b) < 4 {
		return nil, fmt.Errorf("%w: the blob ends before its %s", ErrMalformed, what)
	}
	n := binary.BigEndian.Uint32(r.b)
	if uint64(n) > uint64(len(r.b)-4) {
		return nil, fmt.Errorf("%w: %s of %d bytes, but only %d follow", ErrMalformed, what, n, len(r.b)-4)
	}
	s := r.b[4 : 4+n]
	r.b = r.b[4+n:]
	return s, nil
}
