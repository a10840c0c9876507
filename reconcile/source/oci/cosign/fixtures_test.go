package cosign

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"sync"
	"testing"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content/memory"
	"oras.land/oras-go/v2/registry/remote"
)

// The registry Verify is meant for.
var _ Registry = (*remote.Repository)(nil)

// fakeRegistry is an in-memory repository: oras-go's memory store, plus
// referrers recorded as they are pushed (with the artifactType a registry
// would list), content served in place of what is stored, and errors.
type fakeRegistry struct {
	*memory.Store
	referrers    map[digest.Digest][]ocispec.Descriptor
	serve        map[digest.Digest][]byte
	fetched      []digest.Digest
	resolveErr   error
	fetchErr     error         // the error of every Fetch, or of failFetch's
	failFetch    digest.Digest // when set, the only content fetchErr is for
	referrersErr error
}

func newFakeRegistry() *fakeRegistry {
	return &fakeRegistry{
		Store:     memory.New(),
		referrers: map[digest.Digest][]ocispec.Descriptor{},
		serve:     map[digest.Digest][]byte{},
	}
}

func (r *fakeRegistry) Resolve(ctx context.Context, ref string) (ocispec.Descriptor, error) {
	if r.resolveErr != nil {
		return ocispec.Descriptor{}, r.resolveErr
	}
	return r.Store.Resolve(ctx, ref)
}

func (r *fakeRegistry) Fetch(ctx context.Context, d ocispec.Descriptor) (io.ReadCloser, error) {
	r.fetched = append(r.fetched, d.Digest)
	if r.fetchErr != nil && (r.failFetch == "" || r.failFetch == d.Digest) {
		return nil, r.fetchErr
	}
	if b, ok := r.serve[d.Digest]; ok {
		return io.NopCloser(bytes.NewReader(b)), nil
	}
	return r.Store.Fetch(ctx, d)
}

func (r *fakeRegistry) Referrers(ctx context.Context, desc ocispec.Descriptor, artifactType string, fn func([]ocispec.Descriptor) error) error {
	if r.referrersErr != nil {
		return r.referrersErr
	}
	var page []ocispec.Descriptor
	for _, d := range r.referrers[desc.Digest] {
		if artifactType == "" || d.ArtifactType == artifactType {
			page = append(page, d)
		}
	}
	if len(page) == 0 {
		return nil
	}
	return fn(page)
}

func (r *fakeRegistry) wasFetched(d digest.Digest) bool {
	for _, f := range r.fetched {
		if f == d {
			return true
		}
	}
	return false
}

// world is a fake registry holding one artifact, the target, to sign.
type world struct {
	t      testing.TB
	reg    *fakeRegistry
	target ocispec.Descriptor
}

func newWorld(t testing.TB) *world {
	w := &world{t: t, reg: newFakeRegistry()}
	w.target = w.artifact("hello")
	return w
}

// artifact pushes an artifact manifest with one layer holding text.
func (w *world) artifact(text string) ocispec.Descriptor {
	cfg := w.blob(ocispec.MediaTypeEmptyJSON, []byte("{}"), nil)
	layer := w.blob("text/plain", []byte(text), nil)
	return w.manifest(ocispec.Manifest{
		Versioned:    ocispecVersioned,
		MediaType:    ocispec.MediaTypeImageManifest,
		ArtifactType: "application/vnd.example.config",
		Config:       cfg,
		Layers:       []ocispec.Descriptor{layer},
	})
}

var ocispecVersioned = specs.Versioned{SchemaVersion: 2}

func (w *world) blob(mediaType string, b []byte, annotations map[string]string) ocispec.Descriptor {
	w.t.Helper()
	d := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(b), Size: int64(len(b)), Annotations: annotations}
	if ok, _ := w.reg.Exists(context.Background(), d); ok {
		return d
	}
	if err := w.reg.Push(context.Background(), d, bytes.NewReader(b)); err != nil {
		w.t.Fatal(err)
	}
	return d
}

func (w *world) manifest(m ocispec.Manifest) ocispec.Descriptor {
	w.t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		w.t.Fatal(err)
	}
	return w.blob(m.MediaType, b, nil)
}

// legacy pushes a signature manifest of the layers and tags it as cosign
// does, for the target.
func (w *world) legacy(layers ...ocispec.Descriptor) ocispec.Descriptor {
	return w.legacyFor(w.target, layers...)
}

func (w *world) legacyFor(target ocispec.Descriptor, layers ...ocispec.Descriptor) ocispec.Descriptor {
	w.t.Helper()
	cfg := w.blob("application/vnd.oci.image.config.v1+json", []byte(`{"architecture":"","os":"","config":{},"rootfs":{"type":"layers","diff_ids":[]}}`), nil)
	d := w.manifest(ocispec.Manifest{Versioned: ocispecVersioned, MediaType: ocispec.MediaTypeImageManifest, Config: cfg, Layers: layers})
	if err := w.reg.Tag(context.Background(), d, legacyTag(target)); err != nil {
		w.t.Fatal(err)
	}
	return d
}

// sigLayer pushes a simple-signing layer: payload, with sig as its
// signature annotation.
func (w *world) sigLayer(payload, sig []byte) ocispec.Descriptor {
	return w.blob(simpleSigningMediaType, payload, map[string]string{signatureAnnotation: base64.StdEncoding.EncodeToString(sig)})
}

// referrer pushes a referrer manifest of the layers with the target as its
// subject, as cosign does, and lists it with artifactType listed.
func (w *world) referrer(listed string, layers ...ocispec.Descriptor) ocispec.Descriptor {
	return w.referrerFor(w.target, listed, layers...)
}

func (w *world) referrerFor(subject ocispec.Descriptor, listed string, layers ...ocispec.Descriptor) ocispec.Descriptor {
	w.t.Helper()
	cfg := w.blob(ocispec.MediaTypeEmptyJSON, []byte("{}"), nil)
	d := w.manifest(ocispec.Manifest{
		Versioned:    ocispecVersioned,
		MediaType:    ocispec.MediaTypeImageManifest,
		ArtifactType: bundleMediaType,
		Config:       cfg,
		Layers:       layers,
		Subject:      &subject,
		Annotations:  map[string]string{"dev.sigstore.bundle.content": "dsse-envelope", "dev.sigstore.bundle.predicateType": signPredicateType},
	})
	d.ArtifactType = listed
	w.reg.referrers[subject.Digest] = append(w.reg.referrers[subject.Digest], d)
	return d
}

func (w *world) bundleLayer(b []byte) ocispec.Descriptor {
	return w.blob(bundleMediaType, b, nil)
}

// simpleSigning is the payload cosign signs for d, as it writes it.
func simpleSigningPayload(d digest.Digest) []byte {
	return fmt.Appendf(nil, `{"critical":{"identity":{"docker-reference":"localhost:5000/app"},"image":{"docker-manifest-digest":%q},"type":"cosign container image signature"},"optional":null}`, d)
}

// statementPayload is the in-toto statement cosign sign --new-bundle-format
// signs for d.
func statementPayload(d digest.Digest) []byte {
	return fmt.Appendf(nil, `{"_type":"https://in-toto.io/Statement/v1","subject":[{"digest":{%q:%q}}],"predicateType":"https://sigstore.dev/cosign/sign/v1"}`, d.Algorithm(), d.Encoded())
}

// dsseBundle is a bundle as cosign writes it, with a DSSE envelope.
func dsseBundle(hint, payloadType string, payload, sig []byte) []byte {
	b, err := json.Marshal(map[string]any{
		"mediaType":            bundleMediaType,
		"verificationMaterial": map[string]any{"publicKey": map[string]any{"hint": hint}},
		"dsseEnvelope": map[string]any{
			"payload":     payload,
			"payloadType": payloadType,
			"signatures":  []any{map[string]any{"sig": sig}},
		},
	})
	if err != nil {
		panic(err)
	}
	return b
}

// messageBundle is a bundle with a messageSignature of a message whose
// SHA-256 is sum.
func messageBundle(hint string, sum, sig []byte) []byte {
	b, err := json.Marshal(map[string]any{
		"mediaType":            bundleMediaType,
		"verificationMaterial": map[string]any{"publicKey": map[string]any{"hint": hint}},
		"messageSignature": map[string]any{
			"messageDigest": map[string]any{"algorithm": "SHA2_256", "digest": sum},
			"signature":     sig,
		},
	})
	if err != nil {
		panic(err)
	}
	return b
}

// signer signs as cosign does with one kind of key.
type signer struct {
	name string
	priv crypto.Signer
	// sign signs msg.
	sign func(msg []byte) []byte
}

func (s signer) key() Key {
	k, err := newKey(s.priv.Public())
	if err != nil {
		panic(err)
	}
	return k
}

// hint is cosign's publicKey.hint for the key: the padded base64 of the
// SHA-256 of its DER.
func (s signer) hint() string {
	der, err := x509.MarshalPKIXPublicKey(s.priv.Public())
	if err != nil {
		panic(err)
	}
	sum := sha256.Sum256(der)
	return base64.StdEncoding.EncodeToString(sum[:])
}

func (s signer) pem() []byte {
	der, err := x509.MarshalPKIXPublicKey(s.priv.Public())
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func ecdsaSigner(name string, curve elliptic.Curve, hash crypto.Hash) signer {
	priv := must(ecdsa.GenerateKey(curve, rand.Reader))
	return signer{name: name, priv: priv, sign: func(msg []byte) []byte {
		h := hash.New()
		h.Write(msg)
		return must(ecdsa.SignASN1(rand.Reader, priv, h.Sum(nil)))
	}}
}

func ed25519Signer(name string, seed byte, prehash bool) signer {
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
	return signer{name: name, priv: priv, sign: func(msg []byte) []byte {
		if prehash {
			h := sha512.Sum512(msg)
			return must(priv.Sign(nil, h[:], &ed25519.Options{Hash: crypto.SHA512}))
		}
		return ed25519.Sign(priv, msg)
	}}
}

func rsaSigner(name string, bits int) signer {
	priv := must(rsa.GenerateKey(rand.Reader, bits))
	return signer{name: name, priv: priv, sign: func(msg []byte) []byte {
		h := sha256.Sum256(msg)
		return must(rsa.SignPKCS1v15(rand.Reader, priv, crypto.SHA256, h[:]))
	}}
}

// The signers of the tests, made once (RSA keys are slow to make).
var signers = sync.OnceValue(func() map[string]signer {
	all := []signer{
		ecdsaSigner("p256", elliptic.P256(), crypto.SHA256),
		ecdsaSigner("p384", elliptic.P384(), crypto.SHA384),
		ecdsaSigner("p384-sha256", elliptic.P384(), crypto.SHA256),
		ed25519Signer("ed25519", 1, false),
		ed25519Signer("ed25519ph", 2, true),
		rsaSigner("rsa", 2048),
		ecdsaSigner("other", elliptic.P256(), crypto.SHA256),
	}
	m := map[string]signer{}
	for _, s := range all {
		m[s.name] = s
	}
	return m
})
