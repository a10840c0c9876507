package cosign

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/errdef"
)

// cosignSignatureType is the critical.type of a simple-signing payload
// that cosign signs for an image.
const cosignSignatureType = "cosign container image signature"

// legacyTag is the tag cosign's signatures of target are stored under:
// sha256-<hex>.sig.
func legacyTag(target ocispec.Descriptor) string {
	return target.Digest.Algorithm().String() + "-" + target.Digest.Encoded() + ".sig"
}

// legacy looks for a signature in the signature tag's manifest. It returns
// the key's ID when one verifies, "" when none does (the refusals are
// recorded), or an error of the registry.
func (v *verifier) legacy(ctx context.Context) (string, error) {
	tag := legacyTag(v.target)
	desc, err := v.reg.Resolve(ctx, tag)
	if err != nil {
		if errors.Is(err, errdef.ErrNotFound) {
			return "", nil
		}
		return "", fmt.Errorf("cosign: resolving signature tag %s: %w", tag, err)
	}
	v.sigTag = true
	what := "signature tag " + tag
	if desc.MediaType != "" && !isManifest(desc.MediaType) {
		v.bad("", "%s is a %s, not an image manifest", what, quoted(desc.MediaType))
		return "", nil
	}
	raw, err := v.fetch(ctx, desc, MaxManifestSize, what)
	if err != nil {
		if isContent(err) {
			v.bad("", "%w", err)
			return "", nil
		}
		return "", err
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(raw, &m); err != nil || (m.MediaType != "" && !isManifest(m.MediaType)) {
		v.bad("", "%s is not an image manifest (%v)", what, err)
		return "", nil
	}
	for i, layer := range m.Layers {
		if layer.MediaType != simpleSigningMediaType {
			continue
		}
		if !v.take() {
			break
		}
		if err := ctx.Err(); err != nil {
			return "", err
		}
		id, err := v.legacyLayer(ctx, layer, fmt.Sprintf("%s layer %d", tag, i))
		if id != "" || err != nil {
			return id, err
		}
	}
	return "", nil
}

// legacyLayer checks one simple-signing layer: its annotation is the
// base64 signature over the layer's bytes, the payload.
func (v *verifier) legacyLayer(ctx context.Context, layer ocispec.Descriptor, where string) (string, error) {
	claimed := certPrint(layer.Annotations[certificateAnnotation])
	text := layer.Annotations[signatureAnnotation]
	if text == "" {
		v.bad(claimed, "%s has no %s annotation", where, signatureAnnotation)
		return "", nil
	}
	sig, err := base64.StdEncoding.DecodeString(text)
	if err != nil {
		v.bad(claimed, "%s: annotation %s is not base64: %v", where, signatureAnnotation, err)
		return "", nil
	}
	payload, err := v.fetch(ctx, layer, MaxLayerSize, where)
	if err != nil {
		if isContent(err) {
			v.bad(claimed, "%w", err)
			return "", nil
		}
		return "", err
	}
	key, ok := v.match(payload, sig)
	if !ok {
		v.unverified(where, claimed)
		return "", nil
	}
	if c, err := checkSimpleSigning(payload, v.target.Digest); err != nil {
		v.refuse(refusal{class: c, keyID: key.ID, err: fmt.Errorf("%s, signed by key %s: %w", where, key.ID, err)})
		return "", nil
	}
	return key.ID, nil
}

// simpleSigning is the payload cosign signs in the legacy format (Red
// Hat's simple signing, as cosign writes it): only the fields checked.
type simpleSigning struct {
	Critical struct {
		Image struct {
			DockerManifestDigest string `json:"docker-manifest-digest"`
		} `json:"image"`
		Type string `json:"type"`
	} `json:"critical"`
}

// checkSimpleSigning checks a signed simple-signing payload: its type is
// cosign's image signature and it names want. The identity
// (critical.identity.docker-reference, where the image was when signed)
// and the optional annotations are not checked, as cosign verify does not
// by default: the digest is what is signed.
func checkSimpleSigning(payload []byte, want digest.Digest) (class, error) {
	var p simpleSigning
	if err := json.Unmarshal(payload, &p); err != nil {
		return classBad, fmt.Errorf("the payload is not simple-signing JSON: %w", err)
	}
	if p.Critical.Type != cosignSignatureType {
		return classBad, fmt.Errorf("the payload's critical.type is %s, not %q", quoted(p.Critical.Type), cosignSignatureType)
	}
	if got := p.Critical.Image.DockerManifestDigest; got != want.String() {
		return classOtherDigest, fmt.Errorf("the payload names %s", quoted(got))
	}
	return 0, nil
}

// certPrint is the fingerprint of the key of a PEM certificate (a keyless
// signature's), to name it; "" if there is none.
func certPrint(text string) string {
	if text == "" {
		return ""
	}
	block, _ := pem.Decode([]byte(text))
	if block == nil {
		return ""
	}
	return derCertPrint(block.Bytes)
}

func derCertPrint(der []byte) string {
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return ""
	}
	spki, err := x509.MarshalPKIXPublicKey(cert.PublicKey)
	if err != nil {
		return ""
	}
	return fingerprint(spki)
}
