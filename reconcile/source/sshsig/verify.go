package sshsig

import (
	"crypto/sha256"
	"crypto/sha512"
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

// Verify checks that s signs message in namespace, by a key that allowed
// lets sign in namespace at time at (the time the signer claims, such as
// a commit's committer date), and returns the first line that allows it.
// The checks run in the order the package documentation gives; the error
// wraps ErrUnknownKey, ErrNotAllowed, ErrBadSignature or ErrUnsupported.
func (s *Signature) Verify(message []byte, namespace string, allowed *AllowedSigners, at time.Time) (*Signer, error) {
	lines := allowed.lookup(s.Key)
	if len(lines) == 0 {
		return nil, ErrUnknownKey
	}
	var signer *Signer
	var refused []string
	for i := range lines {
		if why := lines[i].refuses(namespace, at); why != "" {
			refused = append(refused, why)
			continue
		}
		signer = &lines[i]
		break
	}
	if signer == nil {
		return nil, &NotAllowedError{Reasons: refused}
	}
	if s.Namespace != namespace {
		return nil, fmt.Errorf("%w: it is made for namespace %q, not %q", ErrBadSignature, s.Namespace, namespace)
	}
	var digest []byte
	switch s.HashAlgorithm {
	case "sha256":
		h := sha256.Sum256(message)
		digest = h[:]
	case "sha512":
		h := sha512.Sum512(message)
		digest = h[:]
	default:
		return nil, fmt.Errorf("%w: hash algorithm %q (want sha256 or sha512)", ErrUnsupported, s.HashAlgorithm)
	}
	if err := checkAlgorithm(s.Key, s.Sig.Format); err != nil {
		return nil, err
	}
	if err := s.Key.Verify(signedData(namespace, s.HashAlgorithm, digest), s.Sig); err != nil {
		return nil, fmt.Errorf("%w: it does not match the signed message (%v)", ErrBadSignature, err)
	}
	return signer, nil
}

// checkAlgorithm refuses a signature algorithm that does not fit the key,
// and SHA-1 RSA signatures (ssh-rsa), as ssh-keygen does.
func checkAlgorithm(key ssh.PublicKey, format string) error {
	if key.Type() == ssh.KeyAlgoRSA {
		switch format {
		case ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSASHA512:
			return nil
		case ssh.KeyAlgoRSA:
			return fmt.Errorf("%w: signature algorithm ssh-rsa hashes with SHA-1 and is refused (sign with rsa-sha2-256 or rsa-sha2-512)", ErrUnsupported)
		}
	} else if format == key.Type() {
		return nil
	}
	return fmt.Errorf("%w: signature algorithm %q for a %s key", ErrUnsupported, format, key.Type())
}

// signedData is what the key signs: "SSHSIG", then as SSH strings the
// namespace, an empty reserved field and the hash algorithm, then the
// message's hash as an SSH string. The reserved field is empty whatever
// the blob holds, as in ssh-keygen.
func signedData(namespace, hashAlg string, digest []byte) []byte {
	b := []byte(magic)
	for _, s := range [][]byte{[]byte(namespace), nil, []byte(hashAlg), digest} {
		b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
		b = append(b, s...)
	}
	return b
}

// refuses says why sg does not let its key sign in namespace at time at,
// "" when it does.
func (sg *Signer) refuses(namespace string, at time.Time) string {
	switch {
	case sg.Namespaces != nil && !matchList(namespace, sg.Namespaces):
		return fmt.Sprintf("line %d allows the key only for namespaces %q, not %q", sg.Line, strings.Join(sg.Namespaces, ","), namespace)
	case !sg.ValidAfter.IsZero() && at.Unix() < sg.ValidAfter.Unix():
		return fmt.Sprintf("line %d allows the key only from %s (valid-after), not at %s", sg.Line, utc(sg.ValidAfter), utc(at))
	case !sg.ValidBefore.IsZero() && at.Unix() > sg.ValidBefore.Unix():
		return fmt.Sprintf("line %d allows the key only until %s (valid-before), not at %s", sg.Line, utc(sg.ValidBefore), utc(at))
	}
	return ""
}
