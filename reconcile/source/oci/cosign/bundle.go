package cosign

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/errdef"
)

// What a Sigstore bundle of a cosign image signature says.
const (
	inTotoPayloadType = "application/vnd.in-toto+json"
	statementType     = "https://in-toto.io/Statement/v1"
	signPredicateType = "https://sigstore.dev/cosign/sign/v1"
)

// errStopListing stops the listing of referrers at maxListed.
var errStopListing = errors.New("enough referrers listed")

// bundles looks for a signature among the artifact's referrers: manifests
// with a Sigstore bundle layer. Those whose artifactType is the bundle's
// media type come first, then the others: a registry's referrers API or a
// fallback index may record another artifactType (go-containerregistry's
// fallback index, which cosign writes on a registry without the API,
// records the config's media type, application/vnd.oci.empty.v1+json), so
// the layers decide. It returns the key's ID when one verifies, "" when
// none does (the refusals are recorded), or an error of the registry.
func (v *verifier) bundles(ctx context.Context) (string, error) {
	var first, rest []ocispec.Descriptor
	listed := 0
	err := v.reg.Referrers(ctx, v.target, "", func(page []ocispec.Descriptor) error {
		for _, d := range page {
			if listed == maxListed {
				return errStopListing
			}
			listed++
			if d.ArtifactType == bundleMediaType {
				first = append(first, d)
			} else {
				rest = append(rest, d)
			}
		}
		return nil
	})
	switch {
	case errors.Is(err, errStopListing):
		v.truncated = true
	case errors.Is(err, errdef.ErrNotFound):
	case err != nil:
		return "", fmt.Errorf("cosign: listing the referrers of %s: %w", v.target.Digest, err)
	}
	for _, d := range append(first, rest...) {
		if d.MediaType != "" && !isManifest(d.MediaType) {
			continue
		}
		if v.referrersLeft == 0 {
			v.truncated = true
			break
		}
		v.referrersLeft--
		if err := ctx.Err(); err != nil {
			return "", err
		}
		if id, err := v.referrer(ctx, d); id != "" || err != nil {
			return id, err
		}
	}
	return "", nil
}

// referrer checks the bundle layers of one referrer manifest. A referrer
// that cannot be read counts as a bad signature only when its
// artifactType says it is a bundle: otherwise it may be anything.
func (v *verifier) referrer(ctx context.Context, d ocispec.Descriptor) (string, error) {
	what := "referrer " + d.Digest.String()
	bundle := d.ArtifactType == bundleMediaType
	raw, err := v.fetch(ctx, d, MaxManifestSize, what)
	if err != nil {
		if isContent(err) {
			if bundle {
				v.bad("", "%w", err)
			}
			return "", nil
		}
		return "", err
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		if bundle {
			v.bad("", "%s is not an image manifest: %v", what, err)
		}
		return "", nil
	}
	for i, layer := range m.Layers {
		if layer.MediaType != bundleMediaType {
			continue
		}
		if !v.take() {
			break
		}
		if id, err := v.bundleLayer(ctx, layer, fmt.Sprintf("%s layer %d", what, i)); id != "" || err != nil {
			return id, err
		}
	}
	return "", nil
}

// sigstoreBundle is a Sigstore bundle of media type v0.3 as protojson
// writes it (lowerCamelCase names, bytes in standard base64): only the
// fields read. Its transparency log entries and timestamps are not read:
// only the key verifies the signature.
type sigstoreBundle struct {
	MediaType            string `json:"mediaType"`
	VerificationMaterial struct {
		PublicKey *struct {
			Hint string `json:"hint"`
		} `json:"publicKey"`
		Certificate *struct {
			RawBytes []byte `json:"rawBytes"`
		} `json:"certificate"`
		X509CertificateChain *struct {
			Certificates []struct {
				RawBytes []byte `json:"rawBytes"`
			} `json:"certificates"`
		} `json:"x509CertificateChain"`
	} `json:"verificationMaterial"`
	DSSEEnvelope     *envelope         `json:"dsseEnvelope"`
	MessageSignature *messageSignature `json:"messageSignature"`
}

type envelope struct {
	Payload     []byte `json:"payload"`
	PayloadType string `json:"payloadType"`
	Signatures  []struct {
		Sig []byte `json:"sig"`
	} `json:"signatures"`
}

type messageSignature struct {
	MessageDigest *struct {
		Algorithm string `json:"algorithm"`
		Digest    []byte `json:"digest"`
	} `json:"messageDigest"`
	Signature []byte `json:"signature"`
}

// claimedKey is the key the bundle names, as a fingerprint when it can
// be one: cosign's publicKey.hint is the padded base64 of the SHA-256 of
// the key's DER, which is the digest of a Key's ID; a certificate's key is
// fingerprinted. Nothing of it is trusted: it names the key in errors.
func (b *sigstoreBundle) claimedKey() string {
	vm := b.VerificationMaterial
	switch {
	case vm.PublicKey != nil:
		if raw, err := base64.StdEncoding.DecodeString(vm.PublicKey.Hint); err == nil && len(raw) == sha256.Size {
			return "SHA256:" + base64.RawStdEncoding.EncodeToString(raw)
		}
		return printable(vm.PublicKey.Hint)
	case vm.Certificate != nil:
		return derCertPrint(vm.Certificate.RawBytes)
	case vm.X509CertificateChain != nil && len(vm.X509CertificateChain.Certificates) > 0:
		return derCertPrint(vm.X509CertificateChain.Certificates[0].RawBytes)
	}
	return ""
}

// bundleLayer checks one Sigstore bundle layer.
func (v *verifier) bundleLayer(ctx context.Context, layer ocispec.Descriptor, where string) (string, error) {
	raw, err := v.fetch(ctx, layer, MaxLayerSize, where)
	if err != nil {
		if isContent(err) {
			v.bad("", "%w", err)
			return "", nil
		}
		return "", err
	}
	var b sigstoreBundle
	if err := json.Unmarshal(raw, &b); err != nil {
		v.bad("", "%s is not a Sigstore bundle: %v", where, err)
		return "", nil
	}
	claimed := b.claimedKey()
	switch {
	case b.MediaType != bundleMediaType:
		v.bad(claimed, "%s is a bundle of media type %s, want %q", where, quoted(b.MediaType), bundleMediaType)
		return "", nil
	case (b.DSSEEnvelope == nil) == (b.MessageSignature == nil):
		v.bad(claimed, "%s holds neither a dsseEnvelope nor a messageSignature, or both", where)
		return "", nil
	case b.DSSEEnvelope != nil:
		return v.checkEnvelope(b.DSSEEnvelope, where, claimed), nil
	}
	return v.checkMessage(ctx, b.MessageSignature, where, claimed)
}

// pae is DSSE's pre-authentication encoding, what a DSSE signature is
// over: "DSSEv1" SP len(type) SP type SP len(payload) SP payload.
func pae(payloadType string, payload []byte) []byte {
	return fmt.Appendf(nil, "DSSEv1 %d %s %d %s", len(payloadType), payloadType, len(payload), payload)
}

// checkEnvelope checks a DSSE envelope: one of its signatures (the first
// maxEnvelopeSignatures) verifies over the PAE of its payload, which is an
// in-toto statement of cosign's signature predicate whose subject is the
// artifact.
func (v *verifier) checkEnvelope(env *envelope, where, claimed string) string {
	if len(env.Signatures) == 0 {
		v.bad(claimed, "%s: the DSSE envelope has no signature", where)
		return ""
	}
	msg := pae(env.PayloadType, env.Payload)
	for i, s := range env.Signatures {
		if i == maxEnvelopeSignatures {
			break
		}
		key, ok := v.match(msg, s.Sig)
		if !ok {
			continue
		}
		if c, err := checkStatement(env.PayloadType, env.Payload, v.target.Digest); err != nil {
			v.refuse(refusal{class: c, keyID: key.ID, err: fmt.Errorf("%s, signed by key %s: %w", where, key.ID, err)})
			return ""
		}
		return key.ID
	}
	v.unverified(where, claimed)
	return ""
}

// statement is an in-toto statement: only the fields checked.
type statement struct {
	Type    string `json:"_type"`
	Subject []struct {
		Digest map[string]string `json:"digest"`
	} `json:"subject"`
	PredicateType string `json:"predicateType"`
}

// checkStatement checks a signed DSSE payload: an in-toto statement (v1)
// of predicate type https://sigstore.dev/cosign/sign/v1, what cosign sign
// writes (an attestation, of any other predicate type, says something of
// the artifact but does not sign it), with a subject whose digest is want.
func checkStatement(payloadType string, payload []byte, want digest.Digest) (class, error) {
	if payloadType != inTotoPayloadType {
		return classBad, fmt.Errorf("the payload type is %s, not %q", quoted(payloadType), inTotoPayloadType)
	}
	var st statement
	if err := json.Unmarshal(payload, &st); err != nil {
		return classBad, fmt.Errorf("the payload is not an in-toto statement: %w", err)
	}
	if st.Type != statementType {
		return classBad, fmt.Errorf("the statement's _type is %s, not %q", quoted(st.Type), statementType)
	}
	if st.PredicateType != signPredicateType {
		return classBad, fmt.Errorf("the statement is an attestation of predicate type %s, not a cosign signature (%q)", quoted(st.PredicateType), signPredicateType)
	}
	if len(st.Subject) == 0 {
		return classBad, errors.New("the statement has no subject")
	}
	alg := want.Algorithm().String()
	for _, s := range st.Subject {
		if s.Digest[alg] == want.Encoded() {
			return 0, nil
		}
	}
	named := st.Subject[0].Digest[alg]
	if printable(named) == "" {
		named = quoted(named)
	}
	return classOtherDigest, fmt.Errorf("the statement's subject is %s:%s", alg, named)
}

// messageHashes are the hash algorithms of a messageDigest.
var messageHashes = map[string]crypto.Hash{
	"SHA2_256": crypto.SHA256,
	"SHA2_384": crypto.SHA384,
	"SHA2_512": crypto.SHA512,
}

// checkMessage checks a messageSignature: a signature over a message, the
// artifact's manifest, whose hash the bundle gives. Cosign writes these
// only for blobs (sign-blob --new-bundle-format), not for images, but a
// signature of the manifest's bytes made so signs the artifact all the
// same. The signature is verified against the messageDigest (ECDSA, RSA,
// Ed25519ph), or for pure Ed25519 against the manifest's bytes, fetched;
// then the messageDigest must be the manifest's.
func (v *verifier) checkMessage(ctx context.Context, ms *messageSignature, where, claimed string) (string, error) {
	md := ms.MessageDigest
	if md == nil {
		v.bad(claimed, "%s: the messageSignature has no messageDigest", where)
		return "", nil
	}
	hash, ok := messageHashes[md.Algorithm]
	if !ok || len(md.Digest) != hash.Size() {
		v.bad(claimed, "%s: messageDigest of algorithm %s and %d bytes: want SHA2_256, SHA2_384 or SHA2_512", where, quoted(md.Algorithm), len(md.Digest))
		return "", nil
	}
	var key Key
	found, overManifest := false, false
	for _, k := range v.keys {
		if verifyDigest(k.Public, hash, md.Digest, ms.Signature) {
			key, found = k, true
			break
		}
	}
	for _, k := range v.keys {
		pub, ok := k.Public.(ed25519.PublicKey)
		if found || !ok {
			continue
		}
		m, err := v.targetBytes(ctx)
		if err != nil {
			if isContent(err) {
				v.bad(claimed, "%s: %w", where, err)
				return "", nil
			}
			return "", err
		}
		if ed25519.Verify(pub, m, ms.Signature) {
			key, found, overManifest = k, true, true
		}
	}
	if !found {
		v.unverified(where, claimed)
		return "", nil
	}
	same, err := v.isTargetHash(ctx, hash, md.Digest)
	if err != nil {
		if isContent(err) {
			v.bad(key.ID, "%s: %w", where, err)
			return "", nil
		}
		return "", err
	}
	switch {
	case !same && overManifest:
		v.bad(key.ID, "%s, signed by key %s: the messageDigest is not the manifest's", where, key.ID)
		return "", nil
	case !same:
		v.refuse(refusal{class: classOtherDigest, keyID: key.ID,
			err: fmt.Errorf("%s, signed by key %s: the message signed has digest %s", where, key.ID, hex.EncodeToString(md.Digest))})
		return "", nil
	}
	return key.ID, nil
}

// isTargetHash reports whether sum is the hash of the target manifest:
// its digest when the algorithms agree, otherwise a hash of its bytes.
func (v *verifier) isTargetHash(ctx context.Context, hash crypto.Hash, sum []byte) (bool, error) {
	algs := map[digest.Algorithm]crypto.Hash{digest.SHA256: crypto.SHA256, digest.SHA384: crypto.SHA384, digest.SHA512: crypto.SHA512}
	if algs[v.target.Digest.Algorithm()] == hash {
		return hex.EncodeToString(sum) == v.target.Digest.Encoded(), nil
	}
	m, err := v.targetBytes(ctx)
	if err != nil {
		return false, err
	}
	h := hash.New()
	h.Write(m)
	return bytes.Equal(h.Sum(nil), sum), nil
}
