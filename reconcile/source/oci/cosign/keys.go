package cosign

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
)

// MinRSABits is the smallest RSA modulus a key may have.
const MinRSABits = 2048

// Key is a public key that signatures are verified with.
type Key struct {
	// ID is the key's fingerprint: "SHA256:" and the unpadded standard
	// base64 of the SHA-256 of its DER SubjectPublicKeyInfo (as
	// x509.MarshalPKIXPublicKey writes it), written as ssh-keygen -l
	// writes a fingerprint (the value is not ssh's, which hashes another
	// encoding of the key). It is the same for every PEM encoding of the
	// key, and its digest is what cosign puts, padded, in a bundle's
	// publicKey.hint, so that a signature by a key not given can be named.
	// ParseKeys sets it.
	ID string
	// Public is an *ecdsa.PublicKey on P-256 or P-384, an
	// ed25519.PublicKey or an *rsa.PublicKey of at least MinRSABits.
	Public crypto.PublicKey
}

// ParseKeys reads the public keys of a PEM file such as cosign.pub: one or
// more "PUBLIC KEY" blocks (PKIX SubjectPublicKeyInfo), separated by
// nothing but white space. A key listed twice is kept once. Any other
// block type, a block with headers (an encrypted key), a key of another
// algorithm or curve, an RSA key smaller than MinRSABits, text outside the
// blocks, or no block at all is an error that names the block.
func ParseKeys(data []byte) ([]Key, error) {
	var keys []Key
	seen := map[string]bool{}
	rest := data
	for n := 1; ; n++ {
		rest = bytes.TrimLeft(rest, " \t\r\n")
		if len(rest) == 0 {
			break
		}
		if !bytes.HasPrefix(rest, []byte("-----BEGIN ")) {
			where := "before the first block"
			if n > 1 {
				where = fmt.Sprintf("after block %d", n-1)
			}
			return nil, fmt.Errorf("cosign keys: text %s is not a PEM block: %q", where, firstLine(rest))
		}
		block, tail, err := nextBlock(rest)
		if err != nil {
			return nil, fmt.Errorf("cosign keys: block %d: %w", n, err)
		}
		rest = tail
		if block.Type != "PUBLIC KEY" {
			return nil, fmt.Errorf("cosign keys: block %d is a %q block, want \"PUBLIC KEY\" (a PKIX public key, as in cosign.pub)", n, block.Type)
		}
		if len(block.Headers) > 0 {
			return nil, fmt.Errorf("cosign keys: block %d has PEM headers: a public key has none", n)
		}
		pub, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("cosign keys: block %d is not a PKIX public key: %w", n, err)
		}
		key, err := newKey(pub)
		if err != nil {
			return nil, fmt.Errorf("cosign keys: block %d: %w", n, err)
		}
		if !seen[key.ID] {
			seen[key.ID] = true
			keys = append(keys, key)
		}
	}
	if len(keys) == 0 {
		return nil, errors.New("cosign keys: no PEM block: want one or more \"PUBLIC KEY\" blocks")
	}
	return keys, nil
}

// nextBlock decodes the PEM block data starts with, and nothing past its
// END line: pem.Decode alone skips a malformed block and reads the next.
func nextBlock(data []byte) (*pem.Block, []byte, error) {
	end := bytes.Index(data, []byte("\n-----END "))
	if end < 0 {
		return nil, nil, errors.New("no -----END line")
	}
	if bytes.Contains(data[1:end], []byte("-----BEGIN ")) {
		return nil, nil, fmt.Errorf("block starting %q has no -----END line before the next block", firstLine(data))
	}
	eol := bytes.IndexByte(data[end+1:], '\n')
	if eol < 0 {
		eol = len(data)
	} else {
		eol += end + 2
	}
	block, rest := pem.Decode(data[:eol])
	if block == nil || len(bytes.TrimSpace(rest)) > 0 {
		return nil, nil, fmt.Errorf("malformed PEM block starting %q", firstLine(data))
	}
	return block, data[eol:], nil
}

func firstLine(b []byte) string {
	if i := bytes.IndexAny(b, "\r\n"); i >= 0 {
		b = b[:i]
	}
	if len(b) > 64 {
		b = b[:64]
	}
	return string(b)
}

// newKey checks that pub is a key Verify uses and gives it its ID.
func newKey(pub crypto.PublicKey) (Key, error) {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() && k.Curve != elliptic.P384() {
			return Key{}, fmt.Errorf("ECDSA key on %s: only P-256 and P-384 are accepted", curveName(k.Curve))
		}
	case ed25519.PublicKey:
		if len(k) != ed25519.PublicKeySize {
			return Key{}, fmt.Errorf("Ed25519 key of %d bytes, want %d", len(k), ed25519.PublicKeySize)
		}
	case *rsa.PublicKey:
		if k.N == nil || k.N.BitLen() < MinRSABits {
			bits := 0
			if k.N != nil {
				bits = k.N.BitLen()
			}
			return Key{}, fmt.Errorf("RSA key of %d bits: at least %d are required", bits, MinRSABits)
		}
	default:
		return Key{}, fmt.Errorf("%T key: only ECDSA (P-256, P-384), Ed25519 and RSA keys are accepted", pub)
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return Key{}, err
	}
	return Key{ID: fingerprint(der), Public: pub}, nil
}

func curveName(c elliptic.Curve) string {
	if c == nil || c.Params() == nil {
		return "an unknown curve"
	}
	return c.Params().Name
}

// fingerprint is the ID of the key whose DER SubjectPublicKeyInfo is der.
func fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return "SHA256:" + base64.RawStdEncoding.EncodeToString(sum[:])
}

// verifyMessage reports whether sig is pub's signature over msg, in one of
// the ways cosign signs with such a key: ECDSA as ASN.1 DER over SHA-256
// (and, for P-384, over SHA-384, which cosign uses since it picks the hash
// by curve); Ed25519 pure or Ed25519ph (cosign's default for Ed25519 keys,
// SHA-512 prehash); RSA PKCS #1 v1.5 over SHA-256.
func verifyMessage(pub crypto.PublicKey, msg, sig []byte) bool {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		h := sha256.Sum256(msg)
		if ecdsa.VerifyASN1(k, h[:], sig) {
			return true
		}
		if k.Curve == elliptic.P384() {
			h := sha512.Sum384(msg)
			return ecdsa.VerifyASN1(k, h[:], sig)
		}
	case ed25519.PublicKey:
		if ed25519.Verify(k, msg, sig) {
			return true
		}
		h := sha512.Sum512(msg)
		return ed25519.VerifyWithOptions(k, h[:], sig, &ed25519.Options{Hash: crypto.SHA512}) == nil
	case *rsa.PublicKey:
		h := sha256.Sum256(msg)
		return rsa.VerifyPKCS1v15(k, crypto.SHA256, h[:], sig) == nil
	}
	return false
}

// verifyDigest reports whether sig is pub's signature over a message whose
// hash is digest: what a bundle's messageSignature holds. Pure Ed25519
// cannot be checked from a digest (it reports false).
func verifyDigest(pub crypto.PublicKey, hash crypto.Hash, digest, sig []byte) bool {
	if len(digest) != hash.Size() {
		return false
	}
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if hash == crypto.SHA256 || (hash == crypto.SHA384 && k.Curve == elliptic.P384()) {
			return ecdsa.VerifyASN1(k, digest, sig)
		}
	case ed25519.PublicKey:
		if hash == crypto.SHA512 {
			return ed25519.VerifyWithOptions(k, digest, sig, &ed25519.Options{Hash: crypto.SHA512}) == nil
		}
	case *rsa.PublicKey:
		if hash == crypto.SHA256 {
			return rsa.VerifyPKCS1v15(k, crypto.SHA256, digest, sig) == nil
		}
	}
	return false
}
