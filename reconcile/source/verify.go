package source

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	pgperrors "github.com/ProtonMail/go-crypto/openpgp/errors"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// ErrUnsigned is the cause in a *SignatureError for a commit or tag that
// carries no signature at all.
var ErrUnsigned = errors.New("no signature")

// SignatureError says that a revision is not signed by a key of
// Config.TrustedKeysFile, so Fetch refused it: it is neither rendered nor
// applied. Err is ErrUnsigned, an error of
// github.com/ProtonMail/go-crypto/openpgp/errors (ErrUnknownIssuer for a key
// that is not trusted, a SignatureError when the signature does not match),
// or another reason the signature could not be checked.
type SignatureError struct {
	// Commit is the full SHA of the commit the ref resolved to.
	Commit string
	// Tag is the name of the annotated tag whose signature was checked, ""
	// when the commit's own signature was.
	Tag string
	// KeyID is the signing key's 64-bit id in upper-case hex, as the
	// signature names it; "" when unsigned or unreadable.
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
	case errors.Is(e.Err, pgperrors.ErrUnknownIssuer):
		return fmt.Sprintf("%s by %s is signed by key %s which is not in --trusted-keys-file", what, by, e.keyID())
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
// ref named, if it named one, otherwise the commit itself. The keys file is
// read on every call, so keys can be rotated without a restart.
func (s *Source) verify(rev Revision) error {
	ring, err := readTrustedKeys(s.cfg.TrustedKeysFile)
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
	switch o := obj.(type) {
	case *object.Tag:
		se.Tag, se.Signer = o.Name, identity(o.Tagger)
		armored, check = o.PGPSignature, o.Verify
	case *object.Commit:
		se.Signer = identity(o.Committer)
		armored, check = o.PGPSignature, o.Verify
	default:
		return fmt.Errorf("verify %s: a %s cannot be signed", tip, obj.Type())
	}
	if strings.TrimSpace(armored) == "" {
		se.Err = ErrUnsigned
		return se
	}
	se.KeyID = issuer(armored)
	if _, err := check(ring); err != nil {
		se.Err = err
		return se
	}
	return nil
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

// readTrustedKeys reads every armored public key block in file and returns
// them as one armored key ring: go-git's Verify reads only the first block
// of what it is given, and a file made with `cat a.asc b.asc` must trust
// both keys.
func readTrustedKeys(file string) (string, error) {
	if file == "" {
		return "", errors.New("--verify-commits needs --trusted-keys-file")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("read --trusted-keys-file: %w", err)
	}
	var keys openpgp.EntityList
	const begin = "-----BEGIN PGP "
	for rest, n := b, 1; ; n++ {
		i := bytes.Index(rest, []byte(begin))
		if i < 0 {
			break
		}
		rest = rest[i:]
		block, err := armor.Decode(bytes.NewReader(rest))
		if err != nil {
			return "", fmt.Errorf("--trusted-keys-file %s: armored block %d: %w", file, n, err)
		}
		if block.Type != openpgp.PublicKeyType {
			return "", fmt.Errorf("--trusted-keys-file %s: armored block %d is a %q, want %q", file, n, block.Type, openpgp.PublicKeyType)
		}
		el, err := openpgp.ReadKeyRing(block.Body)
		if err != nil {
			return "", fmt.Errorf("--trusted-keys-file %s: armored block %d: %w", file, n, err)
		}
		keys = append(keys, el...)
		rest = rest[len(begin):]
	}
	if len(keys) == 0 {
		return "", fmt.Errorf("--trusted-keys-file %s: no armored OpenPGP public key (%q) found", file, openpgp.PublicKeyType)
	}
	var out bytes.Buffer
	w, err := armor.Encode(&out, openpgp.PublicKeyType, nil)
	if err != nil {
		return "", err
	}
	for _, e := range keys {
		if err := e.Serialize(w); err != nil {
			return "", fmt.Errorf("--trusted-keys-file %s: key %X: %w", file, e.PrimaryKey.KeyId, err)
		}
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	return out.String(), nil
}
