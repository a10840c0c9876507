// Package cosign verifies that an OCI artifact carries a cosign signature
// made with one of a set of public keys, for its manifest's digest.
//
// [ParseKeys] reads the keys from PEM (cosign.pub: "PUBLIC KEY" blocks of
// ECDSA P-256 or P-384, Ed25519 or RSA of at least [MinRSABits] keys); a
// key's ID is its fingerprint, "SHA256:" and the unpadded base64 of the
// SHA-256 of its DER SubjectPublicKeyInfo (see [Key]). [Verify] reads the
// signatures through a [Registry], which oras-go's *remote.Repository
// implements: the package opens no connection of its own.
//
// Cosign stores a signature in one of two places, and Verify looks in
// both, in this order, and stops at the first signature that verifies:
//
//  1. The signature tag, sha256-<hex>.sig in the artifact's repository
//     (cosign v2's default). Its manifest (OCI, or Docker's with
//     COSIGN_DOCKER_MEDIA_TYPES=1) has one layer of media type
//     application/vnd.dev.cosign.simplesigning.v1+json per signature: the
//     layer is the payload, a simple-signing JSON document, and its
//     annotation dev.cosignproject.cosign/signature the base64 signature
//     over the payload's bytes. The payload's critical.type must be
//     "cosign container image signature" and its
//     critical.image.docker-manifest-digest the artifact's digest.
//  2. A referrer (OCI 1.1: a manifest whose subject is the artifact, found
//     through the registry's referrers API or the referrers tag schema)
//     with a layer of media type
//     application/vnd.dev.sigstore.bundle.v0.3+json: a Sigstore bundle
//     (cosign v3's default; v2 with --new-bundle-format). Its dsseEnvelope
//     has payload type application/vnd.in-toto+json and a signature over
//     the DSSE pre-authentication encoding of the payload, an in-toto
//     statement (https://in-toto.io/Statement/v1) of predicate type
//     https://sigstore.dev/cosign/sign/v1 whose subject's digest is the
//     artifact's; an attestation (another predicate type) is not a
//     signature. A bundle with a messageSignature instead (which cosign
//     writes for blobs, not images) is accepted when the message signed is
//     the manifest itself. The referrer's artifactType is not relied on:
//     some registries and fallback indexes record another one, so
//     referrers of the bundle's type are tried first, then the others,
//     and the layer's media type decides.
//
// A signature is checked with each key given: ECDSA signatures are ASN.1
// DER over SHA-256 (or, on P-384, SHA-384), Ed25519 ones pure or Ed25519ph
// (cosign's default for Ed25519 keys), RSA ones PKCS #1 v1.5 over SHA-256.
// The signature is checked before the payload is read: a payload that no
// key given signed is never trusted, not even to name a digest in an
// error. A bundle's transparency log entries, timestamps and certificates
// are not checked, and neither is where the image was when signed: a key
// given verifies the signature, or nothing does.
//
// The registry is not trusted. A descriptor's size is checked before its
// content is fetched (a signature manifest at most [MaxManifestSize], a
// layer at most [MaxLayerSize]); the content is read through an
// io.LimitReader and checked against the descriptor's size and digest; at
// most [MaxSignatures] signature layers and referrer manifests are
// considered, and nothing is followed further than the two places above.
// A signature the registry serves broken is refused, and the others are
// still tried.
//
// When no signature verifies, the error is an *[Error] for the digest
// whose cause is the most telling of the refusals: [ErrOtherDigest] (a
// signature by a key given for another digest, such as one copied from
// another artifact), then [ErrBadSignature], then [ErrUnknownKey]; or
// [ErrUnsigned] when there is no signature at all. An error of the
// registry or the network is returned as it is, wrapped, so that the
// caller can classify it (errors.Is and errors.As reach oras-go's errors).
package cosign
