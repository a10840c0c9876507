package sshsig

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// FuzzVerify parses and verifies any signature, message, allowed-signers
// file and time. It must not panic, must fail only with the package's
// errors, and may accept only a signature that a listed line allows and
// that stops verifying when the message or the namespace changes.
func FuzzVerify(f *testing.F) {
	signer := fixedSigner(f, 1)
	key := authorized(signer.PublicKey())
	other := authorized(fixedSigner(f, 2).PublicKey())
	good := goSign(f, signer, "", GitNamespace, "sha512", message)
	sha256 := goSign(f, signer, "", GitNamespace, "sha256", message)
	file := goSign(f, signer, "", "file", "sha512", message)
	wrongMagic := good
	wrongMagic.magic = "SSHSIH"
	trailing := good
	trailing.trailing = []byte{0, 0, 0, 1}
	nov14 := int64(1_700_000_000)
	for _, seed := range []struct {
		armored []byte
		allowed string
	}{
		{armor(good.bytes()), "a@example.com " + key},
		{armor(sha256.bytes()), "# trusted\n\na@example.com " + key + " comment\n"},
		{armor(good.bytes()), `a namespaces="file,git",valid-after="20230101Z",valid-before="20240101Z" ` + key},
		{armor(good.bytes()), `a namespaces="file" ` + key + "\n" + `a valid-before="20200101Z" ` + key},
		{armor(good.bytes()), `"A B" valid-after="20231114221320" ` + key + "\nb " + other},
		{armor(good.bytes()), "b " + other},
		{armor(file.bytes()), "a " + key},
		{armor(wrongMagic.bytes()), "a " + key},
		{armor(trailing.bytes()), "a " + key},
		{[]byte(armorBegin + "\n/////w==\n" + armorEnd + "\n"), "a cert-authority " + key},
	} {
		f.Add(seed.armored, message, seed.allowed, nov14)
	}
	f.Fuzz(func(t *testing.T, armored, msg []byte, allowedText string, unix int64) {
		allowed, err := ParseAllowedSigners([]byte(allowedText))
		if err != nil && allowed != nil {
			t.Fatalf("ParseAllowedSigners() returned signers with its error %v", err)
		}
		sig, err := Parse(armored)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("Parse() = %v, want ErrMalformed or ErrUnsupported", err)
			}
			return
		}
		at := time.Unix(unix, 0)
		line, err := sig.Verify(msg, GitNamespace, allowed, at)
		again, err2 := sig.Verify(msg, GitNamespace, allowed, at)
		if (err == nil) != (err2 == nil) || (line == nil) != (again == nil) {
			t.Fatalf("Verify() = %v, then %v", err, err2)
		}
		if err != nil {
			if line != nil {
				t.Fatalf("Verify() returned a line with its error %v", err)
			}
			for _, kind := range []error{ErrUnknownKey, ErrNotAllowed, ErrBadSignature, ErrUnsupported} {
				if errors.Is(err, kind) {
					return
				}
			}
			t.Fatalf("Verify() = %v, not one of the package's errors", err)
		}
		if !bytes.Equal(line.Key.Marshal(), sig.Key.Marshal()) || line.refuses(GitNamespace, at) != "" {
			t.Fatalf("Verify() accepted line %d, which does not list the key or does not allow it", line.Line)
		}
		if sig.Namespace != GitNamespace || (sig.HashAlgorithm != "sha256" && sig.HashAlgorithm != "sha512") {
			t.Fatalf("Verify() accepted namespace %q, hash %q", sig.Namespace, sig.HashAlgorithm)
		}
		changed := append(bytes.Clone(msg), 'x')
		if _, err := sig.Verify(changed, GitNamespace, allowed, at); !errors.Is(err, ErrBadSignature) {
			t.Fatalf("Verify() of a changed message = %v, want ErrBadSignature", err)
		}
		if _, err := sig.Verify(msg, "file", allowed, at); err == nil {
			t.Fatal("Verify() accepted the signature for namespace file too")
		}
	})
}
