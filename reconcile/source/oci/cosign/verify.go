package cosign

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"
)

// The bounds on what is read from the registry, which is not trusted.
const (
	// MaxManifestSize is the largest signature manifest (the signature
	// tag's, a referrer's) that is fetched, in bytes.
	MaxManifestSize = 4 << 20
	// MaxLayerSize is the largest signature layer (a simple-signing
	// payload, a Sigstore bundle) that is fetched, in bytes.
	MaxLayerSize = 1 << 20
	// MaxSignatures is how many signature layers are considered, in both
	// places together, and how many referrer manifests are fetched.
	MaxSignatures = 64
	// maxListed is how many referrer descriptors are listed before the
	// listing stops: the others are never considered.
	maxListed = 1024
	// maxEnvelopeSignatures is how many signatures of one DSSE envelope
	// are tried.
	maxEnvelopeSignatures = 8
)

// Media types and annotations cosign writes.
const (
	simpleSigningMediaType = "application/vnd.dev.cosign.simplesigning.v1+json"
	signatureAnnotation    = "dev.cosignproject.cosign/signature"
	certificateAnnotation  = "dev.sigstore.cosign/certificate"
	bundleMediaType        = "application/vnd.dev.sigstore.bundle.v0.3+json"
	dockerManifestType     = "application/vnd.docker.distribution.manifest.v2+json"
)

// Registry is what Verify reads from the artifact's repository. oras-go's
// *remote.Repository implements it; its Referrers falls back to the
// referrers tag schema (an index tagged sha256-<hex>) when the registry
// has no referrers API.
type Registry interface {
	// Resolve gives the descriptor of the manifest a tag names, an error
	// that is errdef.ErrNotFound when there is none.
	Resolve(ctx context.Context, reference string) (ocispec.Descriptor, error)
	// Fetch opens the content target describes.
	Fetch(ctx context.Context, target ocispec.Descriptor) (io.ReadCloser, error)
	// Referrers lists, page by page, the manifests whose subject is desc
	// (of artifactType, or all of them when it is "").
	Referrers(ctx context.Context, desc ocispec.Descriptor, artifactType string, fn func(referrers []ocispec.Descriptor) error) error
}

// Verify checks that the manifest carries a cosign signature made with one
// of keys for its digest, in either place cosign puts one (see the package
// documentation), and returns the ID of that key. manifest is the
// descriptor Resolve gives for the artifact: its digest is what a
// signature must name, and its size bounds the one fetch of the manifest
// itself, for a bundle's messageSignature.
//
// When none does, the error is an *Error (see ErrUnsigned, ErrUnknownKey,
// ErrOtherDigest, ErrBadSignature). An error of the registry or the
// network (any error of Resolve, Fetch or Referrers but not found) stops
// the verification and is returned wrapped, not as an *Error, so that
// errors.Is and errors.As reach it; so is ctx's error. Bad arguments (no
// keys, a key of another kind, an invalid digest) are plain errors too.
func Verify(ctx context.Context, reg Registry, manifest ocispec.Descriptor, keys []Key) (keyID string, err error) {
	if reg == nil {
		return "", errors.New("cosign: no registry to read signatures from")
	}
	if len(keys) == 0 {
		return "", errors.New("cosign: no public key to verify signatures with")
	}
	if err := manifest.Digest.Validate(); err != nil {
		return "", fmt.Errorf("cosign: manifest digest %q: %w", manifest.Digest, err)
	}
	v := &verifier{reg: reg, target: manifest, keys: keys, budget: MaxSignatures, referrersLeft: MaxSignatures}
	for _, k := range keys {
		checked, err := newKey(k.Public)
		if err != nil {
			return "", fmt.Errorf("cosign: key %q: %w", k.ID, err)
		}
		v.prints = append(v.prints, checked.ID)
	}
	if id, err := v.legacy(ctx); id != "" || err != nil {
		return id, err
	}
	if id, err := v.bundles(ctx); id != "" || err != nil {
		return id, err
	}
	return "", v.failure()
}

// class orders the reasons a signature is refused, from the least telling.
type class int

const (
	classUnknownKey class = iota + 1
	classBad
	classOtherDigest
)

// refusal is why one signature was refused.
type refusal struct {
	class class
	keyID string
	err   error
}

type verifier struct {
	reg    Registry
	target ocispec.Descriptor
	keys   []Key
	prints []string // the fingerprint of each key, computed

	budget        int  // signature layers still to consider
	referrersLeft int  // referrer manifests still to fetch
	truncated     bool // a bound left signatures unconsidered
	sigTag        bool // the signature tag exists

	refused int
	worst   *refusal

	manifest []byte // the target's bytes, once fetched
}

// take counts one more signature layer, or reports that the bound is
// reached.
func (v *verifier) take() bool {
	if v.budget == 0 {
		v.truncated = true
		return false
	}
	v.budget--
	return true
}

// refuse records why a signature was refused, keeping the most telling.
func (v *verifier) refuse(r refusal) {
	v.refused++
	if v.worst == nil || r.class > v.worst.class {
		v.worst = &r
	}
}

func (v *verifier) bad(keyID string, format string, args ...any) {
	v.refuse(refusal{class: classBad, keyID: keyID, err: fmt.Errorf(format, args...)})
}

// keyByPrint is the key given whose fingerprint is id.
func (v *verifier) keyByPrint(id string) (Key, bool) {
	for i, p := range v.prints {
		if p == id {
			return v.keys[i], true
		}
	}
	return Key{}, false
}

// match is the first key that verifies sig over msg.
func (v *verifier) match(msg, sig []byte) (Key, bool) {
	for _, k := range v.keys {
		if verifyMessage(k.Public, msg, sig) {
			return k, true
		}
	}
	return Key{}, false
}

// unverified records a signature that no key given verifies; claimed is
// the fingerprint of the key it names, if any.
func (v *verifier) unverified(where, claimed string) {
	if k, ok := v.keyByPrint(claimed); ok {
		v.bad(k.ID, "%s names key %s, but its signature does not verify with it: the payload or the signature was altered", where, k.ID)
		return
	}
	if claimed != "" {
		v.refuse(refusal{class: classUnknownKey, keyID: claimed,
			err: fmt.Errorf("%s is signed by key %s, which is not among the %d keys given", where, claimed, len(v.keys))})
		return
	}
	v.refuse(refusal{class: classUnknownKey,
		err: fmt.Errorf("%s verifies with none of the %d keys given (made with another key, or altered)", where, len(v.keys))})
}

func (v *verifier) failure() error {
	d := v.target.Digest.String()
	note := ""
	if v.refused > 1 {
		note = fmt.Sprintf(" (and %d other signatures refused)", v.refused-1)
	}
	if v.truncated {
		note += fmt.Sprintf(" (only the first %d signatures and referrers were considered)", MaxSignatures)
	}
	if v.worst == nil {
		tag := fmt.Sprintf("no signature tag %s", legacyTag(v.target))
		if v.sigTag {
			tag = fmt.Sprintf("signature tag %s holds no %s layer,", legacyTag(v.target), simpleSigningMediaType)
		}
		return &Error{Digest: d, Err: fmt.Errorf("%w: %s and no Sigstore bundle is among its referrers%s", ErrUnsigned, tag, note)}
	}
	sentinel := map[class]error{classUnknownKey: ErrUnknownKey, classBad: ErrBadSignature, classOtherDigest: ErrOtherDigest}[v.worst.class]
	return &Error{Digest: d, KeyID: v.worst.keyID, Err: fmt.Errorf("%w: %w%s", sentinel, v.worst.err, note)}
}

// contentError is an error of fetch about the content the registry
// served (or failed to serve), not about the registry or the network.
type contentError struct{ err error }

func (e *contentError) Error() string { return e.err.Error() }
func (e *contentError) Unwrap() error { return e.err }

func contentErrorf(format string, args ...any) error {
	return &contentError{fmt.Errorf(format, args...)}
}

// isContent reports whether err is about the content (see fetch).
func isContent(err error) bool {
	var c *contentError
	return errors.As(err, &c)
}

// fetch reads the content desc describes, at most limit bytes, and checks
// it against desc's size and digest. A descriptor over the limit is
// refused before any request. An error for which isContent holds is about
// the content (too large, missing, not what the descriptor says); any
// other is the registry's or the network's.
func (v *verifier) fetch(ctx context.Context, desc ocispec.Descriptor, limit int64, what string) ([]byte, error) {
	if desc.Size < 0 || desc.Size > limit {
		return nil, contentErrorf("%s is %d bytes, over the limit of %d", what, desc.Size, limit)
	}
	if err := desc.Digest.Validate(); err != nil {
		return nil, contentErrorf("%s has digest %s: %w", what, quoted(string(desc.Digest)), err)
	}
	rc, err := v.reg.Fetch(ctx, desc)
	if err != nil {
		if errors.Is(err, errdef.ErrNotFound) {
			return nil, contentErrorf("%s (%s) is missing from the registry: %w", what, desc.Digest, err)
		}
		return nil, fmt.Errorf("cosign: fetching %s (%s): %w", what, desc.Digest, err)
	}
	defer rc.Close()
	b, err := content.ReadAll(io.LimitReader(rc, desc.Size+1), desc)
	switch {
	case err == nil:
		return b, nil
	case errors.Is(err, content.ErrMismatchedDigest), errors.Is(err, content.ErrTrailingData), errors.Is(err, io.ErrUnexpectedEOF):
		return nil, contentErrorf("%s (%s) is not what its descriptor says: %w", what, desc.Digest, err)
	}
	return nil, fmt.Errorf("cosign: reading %s (%s): %w", what, desc.Digest, err)
}

// isManifest reports whether mediaType is that of an image manifest, OCI
// or Docker's (cosign writes the latter with COSIGN_DOCKER_MEDIA_TYPES=1).
func isManifest(mediaType string) bool {
	return mediaType == ocispec.MediaTypeImageManifest || mediaType == dockerManifestType
}

// targetBytes fetches the target manifest itself, once: a bundle's
// messageSignature is over it.
func (v *verifier) targetBytes(ctx context.Context) ([]byte, error) {
	if v.manifest == nil {
		b, err := v.fetch(ctx, v.target, MaxManifestSize, "the signed manifest")
		if err != nil {
			return nil, err
		}
		v.manifest = b
	}
	return v.manifest, nil
}

// printable is s when it is short printable ASCII, to be named in an
// error, and "" otherwise.
func printable(s string) string {
	if len(s) > 128 || strings.IndexFunc(s, func(r rune) bool { return r < 0x20 || r > 0x7e }) >= 0 {
		return ""
	}
	return s
}

// quoted is s quoted, to be named in an error, or a note of its length
// when it is long or not printable.
func quoted(s string) string {
	if printable(s) == "" && s != "" {
		return fmt.Sprintf("(%d bytes, not shown)", len(s))
	}
	return strconv.Quote(s)
}
