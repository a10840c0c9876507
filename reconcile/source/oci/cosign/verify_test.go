package cosign

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote/errcode"
)

// verifyCase is a registry set up by setup, verified with the keys of the
// signers named in keys.
type verifyCase struct {
	name  string
	keys  []string
	setup func(w *world)
	// wantKey names the signer whose key verifies; "" for an error.
	wantKey string
	// wantErr is the sentinel of the *Error; wantKeyID names the signer
	// its KeyID is the key of ("" for none).
	wantErr   error
	wantKeyID string
	// check checks more, when set.
	check func(t *testing.T, w *world, err error)
}

// signLegacy is a simple-signing layer of payload signed by s.
func (w *world) signLegacy(s signer, payload []byte) ocispec.Descriptor {
	return w.sigLayer(payload, s.sign(payload))
}

// signBundle is a bundle layer of a DSSE envelope of payload signed by s.
func (w *world) signBundle(s signer, payloadType string, payload []byte) ocispec.Descriptor {
	return w.bundleLayer(dsseBundle(s.hint(), payloadType, payload, s.sign(pae(payloadType, payload))))
}

func (w *world) targetBytes() []byte {
	w.t.Helper()
	b, err := content.FetchAll(context.Background(), w.reg.Store, w.target)
	if err != nil {
		w.t.Fatal(err)
	}
	return b
}

func notFetched(d *ocispec.Descriptor) func(t *testing.T, w *world, err error) {
	return func(t *testing.T, w *world, err error) {
		if w.reg.wasFetched(d.Digest) {
			t.Errorf("%s (%d bytes) was fetched; want it refused before", d.Digest, d.Size)
		}
	}
}

func wraps(target error) func(t *testing.T, w *world, err error) {
	return func(t *testing.T, w *world, err error) {
		if !errors.Is(err, target) {
			t.Errorf("error %q does not wrap %v", err, target)
		}
	}
}

func mentions(text string) func(t *testing.T, w *world, err error) {
	return func(t *testing.T, w *world, err error) {
		if err == nil || !strings.Contains(err.Error(), text) {
			t.Errorf("error %v does not mention %q", err, text)
		}
	}
}

func verifyCases() []verifyCase {
	sg := signers()
	p256, other := sg["p256"], sg["other"]
	var cases []verifyCase
	for _, name := range []string{"p256", "p384", "p384-sha256", "ed25519", "ed25519ph", "rsa"} {
		s := sg[name]
		cases = append(cases,
			verifyCase{
				name: "legacy " + name,
				keys: []string{"other", name},
				setup: func(w *world) {
					w.legacy(w.signLegacy(s, simpleSigningPayload(w.target.Digest)))
				},
				wantKey: name,
			},
			verifyCase{
				name: "bundle DSSE " + name,
				keys: []string{"other", name},
				setup: func(w *world) {
					w.referrer(bundleMediaType, w.signBundle(s, inTotoPayloadType, statementPayload(w.target.Digest)))
				},
				wantKey: name,
			})
	}
	var big, bigBundle, bigManifest, bigReferrer ocispec.Descriptor
	cases = append(cases, []verifyCase{
		{
			name: "legacy in a Docker manifest",
			setup: func(w *world) {
				p := simpleSigningPayload(w.target.Digest)
				cfg := w.blob("application/vnd.docker.container.image.v1+json", []byte("{}"), nil)
				d := w.manifest(ocispec.Manifest{Versioned: ocispecVersioned, MediaType: dockerManifestType, Config: cfg, Layers: []ocispec.Descriptor{w.signLegacy(p256, p)}})
				if err := w.reg.Tag(context.Background(), d, legacyTag(w.target)); err != nil {
					w.t.Fatal(err)
				}
			},
			wantKey: "p256",
		},
		{
			name: "legacy layer of exactly MaxLayerSize",
			setup: func(w *world) {
				p := simpleSigningPayload(w.target.Digest)
				p = append(p[:len(p)-len(`null}`)], `{"pad":"`...)
				p = append(p, bytes.Repeat([]byte("x"), MaxLayerSize-len(p)-len(`"}}`))...)
				p = append(p, `"}}`...)
				w.legacy(w.signLegacy(p256, p))
			},
			wantKey: "p256",
		},
		{
			name: "legacy: the valid signature after refused ones",
			setup: func(w *world) {
				mine := simpleSigningPayload(w.target.Digest)
				w.legacy(
					w.signLegacy(other, mine),
					w.signLegacy(p256, simpleSigningPayload(w.artifact("another").Digest)),
					w.blob("application/vnd.example.other", []byte("not a signature"), nil),
					w.signLegacy(p256, mine))
			},
			wantKey: "p256",
		},
		{
			name: "bundle listed with the config's media type (fallback index)",
			setup: func(w *world) {
				w.referrer(ocispec.MediaTypeEmptyJSON, w.signBundle(p256, inTotoPayloadType, statementPayload(w.target.Digest)))
			},
			wantKey: "p256",
		},
		{
			name: "bundle listed without artifactType, after an SBOM",
			setup: func(w *world) {
				w.referrer("application/spdx+json", w.blob("application/spdx+json", []byte(`{"spdxVersion":"SPDX-2.3"}`), nil))
				w.referrer("", w.signBundle(p256, inTotoPayloadType, statementPayload(w.target.Digest)))
			},
			wantKey: "p256",
		},
		{
			name: "bundle after a refused legacy signature",
			setup: func(w *world) {
				w.legacy(w.signLegacy(other, simpleSigningPayload(w.target.Digest)))
				w.referrer(bundleMediaType, w.signBundle(p256, inTotoPayloadType, statementPayload(w.target.Digest)))
			},
			wantKey: "p256",
		},
		{
			name: "bundle messageSignature ECDSA over the manifest",
			setup: func(w *world) {
				sum := sha256.Sum256(w.targetBytes())
				w.referrer(bundleMediaType, w.bundleLayer(messageBundle(p256.hint(), sum[:], p256.sign(w.targetBytes()))))
			},
			wantKey: "p256",
		},
		{
			name: "bundle messageSignature Ed25519 over the manifest",
			keys: []string{"ed25519"},
			setup: func(w *world) {
				s := sg["ed25519"]
				sum := sha256.Sum256(w.targetBytes())
				w.referrer(bundleMediaType, w.bundleLayer(messageBundle(s.hint(), sum[:], s.sign(w.targetBytes()))))
			},
			wantKey: "ed25519",
		},

		// No signature by a key given.
		{
			name:    "unsigned",
			setup:   func(w *world) {},
			wantErr: ErrUnsigned,
			check:   mentions(".sig and no Sigstore bundle is among its referrers"),
		},
		{
			name: "unsigned, with an SBOM referrer",
			setup: func(w *world) {
				w.referrer("application/spdx+json", w.blob("application/spdx+json", []byte(`{}`), nil))
			},
			wantErr: ErrUnsigned,
		},
		{
			name: "unknown key, legacy",
			setup: func(w *world) {
				w.legacy(w.signLegacy(other, simpleSigningPayload(w.target.Digest)))
			},
			wantErr: ErrUnknownKey,
			check:   mentions("none of the 1 keys given"),
		},
		{
			name: "unknown key, legacy keyless: the certificate's key is named",
			setup: func(w *world) {
				p := simpleSigningPayload(w.target.Digest)
				l := w.blob(simpleSigningMediaType, p, map[string]string{
					signatureAnnotation:   encodeB64(other.sign(p)),
					certificateAnnotation: string(selfSigned(other)),
				})
				w.legacy(l)
			},
			wantErr:   ErrUnknownKey,
			wantKeyID: "other",
		},
		{
			name: "unknown key, bundle: its hint is named",
			setup: func(w *world) {
				w.referrer(bundleMediaType, w.signBundle(other, inTotoPayloadType, statementPayload(w.target.Digest)))
			},
			wantErr:   ErrUnknownKey,
			wantKeyID: "other",
		},
		{
			name: "legacy payload naming another digest",
			setup: func(w *world) {
				w.legacy(w.signLegacy(p256, simpleSigningPayload(w.artifact("another").Digest)))
			},
			wantErr:   ErrOtherDigest,
			wantKeyID: "p256",
		},
		{
			name: "legacy signature copied from another artifact",
			setup: func(w *world) {
				// The whole signature manifest of another artifact, tagged
				// for this one.
				another := w.artifact("another")
				d := w.legacyFor(another, w.signLegacy(p256, simpleSigningPayload(another.Digest)))
				if err := w.reg.Tag(context.Background(), d, legacyTag(w.target)); err != nil {
					w.t.Fatal(err)
				}
			},
			wantErr:   ErrOtherDigest,
			wantKeyID: "p256",
		},
		{
			name: "bundle statement naming another digest",
			setup: func(w *world) {
				w.referrer(bundleMediaType, w.signBundle(p256, inTotoPayloadType, statementPayload(w.artifact("another").Digest)))
			},
			wantErr:   ErrOtherDigest,
			wantKeyID: "p256",
		},
		{
			name: "bundle messageSignature of another manifest",
			setup: func(w *world) {
				msg := []byte(`{"schemaVersion":2}`)
				sum := sha256.Sum256(msg)
				w.referrer(bundleMediaType, w.bundleLayer(messageBundle(p256.hint(), sum[:], p256.sign(msg))))
			},
			wantErr:   ErrOtherDigest,
			wantKeyID: "p256",
		},
		{
			name: "another digest wins over an unknown key",
			setup: func(w *world) {
				w.legacy(w.signLegacy(other, simpleSigningPayload(w.target.Digest)))
				w.referrer(bundleMediaType, w.signBundle(p256, inTotoPayloadType, statementPayload(w.artifact("another").Digest)))
			},
			wantErr:   ErrOtherDigest,
			wantKeyID: "p256",
			check:     mentions("and 1 other signatures refused"),
		},
		{
			name: "tampered legacy payload: cannot be told from another key",
			setup: func(w *world) {
				p := simpleSigningPayload(w.target.Digest)
				sig := p256.sign(p)
				w.legacy(w.sigLayer(bytes.Replace(p, []byte("/app"), []byte("/evil"), 1), sig))
			},
			wantErr: ErrUnknownKey,
			check:   mentions("or altered"),
		},
		{
			name: "tampered bundle payload: its hint names the key",
			setup: func(w *world) {
				p := statementPayload(w.target.Digest)
				sig := p256.sign(pae(inTotoPayloadType, p))
				p = append(p, ' ')
				w.referrer(bundleMediaType, w.bundleLayer(dsseBundle(p256.hint(), inTotoPayloadType, p, sig)))
			},
			wantErr:   ErrBadSignature,
			wantKeyID: "p256",
			check:     mentions("altered"),
		},
		{
			name: "tampered legacy signature bytes",
			setup: func(w *world) {
				p := simpleSigningPayload(w.target.Digest)
				sig := p256.sign(p)
				sig[len(sig)-1] ^= 1
				w.legacy(w.sigLayer(p, sig))
			},
			wantErr: ErrUnknownKey,
		},
		{
			name: "legacy payload of another type",
			setup: func(w *world) {
				p := bytes.Replace(simpleSigningPayload(w.target.Digest), []byte("container image signature"), []byte("container image attestation"), 1)
				w.legacy(w.signLegacy(p256, p))
			},
			wantErr:   ErrBadSignature,
			wantKeyID: "p256",
			check:     mentions(`critical.type is "cosign container image attestation"`),
		},
		{
			name: "legacy payload that is not JSON",
			setup: func(w *world) {
				w.legacy(w.signLegacy(p256, []byte(w.target.Digest.String())))
			},
			wantErr:   ErrBadSignature,
			wantKeyID: "p256",
		},
		{
			name: "legacy layer without signature annotation",
			setup: func(w *world) {
				w.legacy(w.blob(simpleSigningMediaType, simpleSigningPayload(w.target.Digest), nil))
			},
			wantErr: ErrBadSignature,
		},
		{
			name: "bundle DSSE of another payload type",
			setup: func(w *world) {
				w.referrer(bundleMediaType, w.signBundle(p256, "application/json", statementPayload(w.target.Digest)))
			},
			wantErr:   ErrBadSignature,
			wantKeyID: "p256",
			check:     mentions(`payload type is "application/json"`),
		},
		{
			name: "bundle DSSE attestation, not a signature",
			setup: func(w *world) {
				p := bytes.Replace(statementPayload(w.target.Digest), []byte(signPredicateType), []byte("https://slsa.dev/provenance/v1"), 1)
				w.referrer(bundleMediaType, w.signBundle(p256, inTotoPayloadType, p))
			},
			wantErr:   ErrBadSignature,
			wantKeyID: "p256",
			check:     mentions("attestation"),
		},
		{
			name: "bundle DSSE statement of another _type",
			setup: func(w *world) {
				p := bytes.Replace(statementPayload(w.target.Digest), []byte("Statement/v1"), []byte("Statement/v0.1"), 1)
				w.referrer(bundleMediaType, w.signBundle(p256, inTotoPayloadType, p))
			},
			wantErr:   ErrBadSignature,
			wantKeyID: "p256",
		},
		{
			name: "bundle of another version",
			setup: func(w *world) {
				p := statementPayload(w.target.Digest)
				b := dsseBundle(p256.hint(), inTotoPayloadType, p, p256.sign(pae(inTotoPayloadType, p)))
				w.referrer(bundleMediaType, w.bundleLayer(bytes.Replace(b, []byte("v0.3"), []byte("v0.2"), 1)))
			},
			wantErr:   ErrBadSignature,
			wantKeyID: "p256",
			check:     mentions("bundle of media type"),
		},
		{
			name: "legacy layer of another media type is not a signature",
			setup: func(w *world) {
				p := simpleSigningPayload(w.target.Digest)
				w.legacy(w.blob("application/json", p, map[string]string{signatureAnnotation: encodeB64(p256.sign(p))}))
			},
			wantErr: ErrUnsigned,
			check:   mentions("holds no application/vnd.dev.cosign.simplesigning.v1+json layer"),
		},
		{
			name: "bundle layer of another media type is not a signature",
			setup: func(w *world) {
				p := statementPayload(w.target.Digest)
				w.referrer(bundleMediaType, w.blob("application/json", dsseBundle(p256.hint(), inTotoPayloadType, p, p256.sign(pae(inTotoPayloadType, p))), nil))
			},
			wantErr: ErrUnsigned,
		},
		{
			name: "bundle messageSignature by another key",
			setup: func(w *world) {
				sum := sha256.Sum256(w.targetBytes())
				w.referrer(bundleMediaType, w.bundleLayer(messageBundle(other.hint(), sum[:], other.sign(w.targetBytes()))))
			},
			wantErr:   ErrUnknownKey,
			wantKeyID: "other",
		},
		{
			name: "bundle layer that is not JSON",
			setup: func(w *world) {
				w.referrer(bundleMediaType, w.bundleLayer([]byte("{")))
			},
			wantErr: ErrBadSignature,
		},

		// Bounds and integrity: the registry is not trusted.
		{
			name: "oversized legacy layer refused before fetch",
			setup: func(w *world) {
				big = w.sigLayer(bytes.Repeat([]byte(" "), MaxLayerSize+1), []byte("sig"))
				w.legacy(big)
			},
			wantErr: ErrBadSignature,
			check:   notFetched(&big),
		},
		{
			name: "oversized bundle layer refused before fetch",
			setup: func(w *world) {
				bigBundle = w.bundleLayer(bytes.Repeat([]byte(" "), MaxLayerSize+1))
				w.referrer(bundleMediaType, bigBundle)
			},
			wantErr: ErrBadSignature,
			check:   notFetched(&bigBundle),
		},
		{
			name: "oversized signature manifest refused before fetch",
			setup: func(w *world) {
				cfg := w.blob(ocispec.MediaTypeEmptyJSON, []byte("{}"), nil)
				bigManifest = w.manifest(ocispec.Manifest{Versioned: ocispecVersioned, MediaType: ocispec.MediaTypeImageManifest, Config: cfg,
					Layers:      []ocispec.Descriptor{w.signLegacy(p256, simpleSigningPayload(w.target.Digest))},
					Annotations: map[string]string{"pad": strings.Repeat("x", MaxManifestSize)}})
				if err := w.reg.Tag(context.Background(), bigManifest, legacyTag(w.target)); err != nil {
					w.t.Fatal(err)
				}
			},
			wantErr: ErrBadSignature,
			check:   notFetched(&bigManifest),
		},
		{
			name: "oversized referrer of another type ignored unfetched",
			setup: func(w *world) {
				cfg := w.blob(ocispec.MediaTypeEmptyJSON, []byte("{}"), nil)
				bigReferrer = w.manifest(ocispec.Manifest{Versioned: ocispecVersioned, MediaType: ocispec.MediaTypeImageManifest, Config: cfg,
					Subject: &w.target, Annotations: map[string]string{"pad": strings.Repeat("x", MaxManifestSize)}})
				bigReferrer.ArtifactType = "application/spdx+json"
				w.reg.referrers[w.target.Digest] = append(w.reg.referrers[w.target.Digest], bigReferrer)
			},
			wantErr: ErrUnsigned,
			check:   notFetched(&bigReferrer),
		},
		{
			name: "legacy layer whose bytes do not match its digest",
			setup: func(w *world) {
				p := simpleSigningPayload(w.target.Digest)
				l := w.signLegacy(p256, p)
				w.reg.serve[l.Digest] = bytes.Replace(p, []byte("/app"), []byte("/ap2"), 1)
				w.legacy(l)
			},
			wantErr: ErrBadSignature,
			check:   wraps(content.ErrMismatchedDigest),
		},
		{
			name: "bundle layer whose bytes do not match its digest",
			setup: func(w *world) {
				l := w.signBundle(p256, inTotoPayloadType, statementPayload(w.target.Digest))
				served := bytes.Clone(must(content.FetchAll(context.Background(), w.reg.Store, l)))
				served[len(served)-2] = ' '
				w.reg.serve[l.Digest] = served
				w.referrer(bundleMediaType, l)
			},
			wantErr: ErrBadSignature,
			check:   wraps(content.ErrMismatchedDigest),
		},
		{
			name: "signature manifest whose bytes do not match its digest",
			setup: func(w *world) {
				d := w.legacy(w.signLegacy(p256, simpleSigningPayload(w.target.Digest)))
				served := bytes.Clone(must(content.FetchAll(context.Background(), w.reg.Store, d)))
				served[len(served)-1] = ' '
				w.reg.serve[d.Digest] = served
			},
			wantErr: ErrBadSignature,
			check:   wraps(content.ErrMismatchedDigest),
		},
		{
			name: "legacy layer served longer than its size",
			setup: func(w *world) {
				p := simpleSigningPayload(w.target.Digest)
				l := w.signLegacy(p256, p)
				w.reg.serve[l.Digest] = append(bytes.Clone(p), bytes.Repeat([]byte(" "), 2<<20)...)
				w.legacy(l)
			},
			wantErr: ErrBadSignature,
			check:   wraps(content.ErrTrailingData),
		},
		{
			name: "legacy layer missing from the registry",
			setup: func(w *world) {
				p := simpleSigningPayload(w.target.Digest)
				w.legacy(ocispec.Descriptor{MediaType: simpleSigningMediaType, Digest: digest.FromBytes(p), Size: int64(len(p)),
					Annotations: map[string]string{signatureAnnotation: encodeB64(p256.sign(p))}})
			},
			wantErr: ErrBadSignature,
			check:   wraps(errdef.ErrNotFound),
		},
		{
			name: "only the first MaxSignatures legacy layers",
			setup: func(w *world) {
				p := simpleSigningPayload(w.target.Digest)
				var layers []ocispec.Descriptor
				for range MaxSignatures {
					layers = append(layers, w.signLegacy(other, p))
				}
				w.legacy(append(layers, w.signLegacy(p256, p))...)
			},
			wantErr: ErrUnknownKey,
			check:   mentions("only the first 64"),
		},
		{
			name: "the last of MaxSignatures legacy layers",
			setup: func(w *world) {
				p := simpleSigningPayload(w.target.Digest)
				var layers []ocispec.Descriptor
				for range MaxSignatures - 1 {
					layers = append(layers, w.signLegacy(other, p))
				}
				w.legacy(append(layers, w.signLegacy(p256, p))...)
			},
			wantKey: "p256",
		},
		{
			name: "MaxSignatures in both places together",
			setup: func(w *world) {
				p := simpleSigningPayload(w.target.Digest)
				var layers []ocispec.Descriptor
				for range MaxSignatures {
					layers = append(layers, w.signLegacy(other, p))
				}
				w.legacy(layers...)
				w.referrer(bundleMediaType, w.signBundle(p256, inTotoPayloadType, statementPayload(w.target.Digest)))
			},
			wantErr: ErrUnknownKey,
			check:   mentions("only the first 64"),
		},
		{
			name: "only the first MaxSignatures referrers",
			setup: func(w *world) {
				for i := range MaxSignatures {
					w.referrer(bundleMediaType, w.blob("application/vnd.example", fmt.Appendf(nil, "%d", i), nil))
				}
				w.referrer(bundleMediaType, w.signBundle(p256, inTotoPayloadType, statementPayload(w.target.Digest)))
			},
			wantErr: ErrUnsigned,
		},
	}...)
	return cases
}

func encodeB64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// selfSigned is a PEM certificate of s's key, as a keyless signature
// carries one.
func selfSigned(s signer) []byte {
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "signer"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der := must(x509.CreateCertificate(rand.Reader, tmpl, tmpl, s.priv.Public(), s.priv))
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func TestVerify(t *testing.T) {
	sg := signers()
	for _, tc := range verifyCases() {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			tc.setup(w)
			names := tc.keys
			if names == nil {
				names = []string{"p256"}
			}
			var keys []Key
			for _, n := range names {
				keys = append(keys, sg[n].key())
			}
			id, err := Verify(t.Context(), w.reg, w.target, keys)
			if tc.check != nil {
				tc.check(t, w, err)
			}
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				if want := sg[tc.wantKey].key().ID; id != want {
					t.Fatalf("Verify = %q, want %q (%s)", id, want, tc.wantKey)
				}
				return
			}
			if id != "" {
				t.Errorf("Verify returned key %q with error %v", id, err)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Verify: %v (%T), want an *Error", err, err)
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Verify: %v, want %v", err, tc.wantErr)
			}
			wantID := ""
			if tc.wantKeyID != "" {
				wantID = sg[tc.wantKeyID].key().ID
			}
			if e.KeyID != wantID {
				t.Errorf("KeyID = %q, want %q (%s); error: %v", e.KeyID, wantID, tc.wantKeyID, err)
			}
			if e.Digest != w.target.Digest.String() || !strings.Contains(err.Error(), e.Digest) {
				t.Errorf("error %q does not name digest %s", err, w.target.Digest)
			}
			if e.KeyID != "" && !strings.Contains(err.Error(), e.KeyID) {
				t.Errorf("error %q does not name key %s", err, e.KeyID)
			}
			t.Logf("%v", err)
		})
	}
}

// TestVerifyRegistryErrors checks that an error of the registry stops the
// verification and reaches the caller as it is, not as an *Error.
func TestVerifyRegistryErrors(t *testing.T) {
	p256 := signers()["p256"]
	denied := &errcode.ErrorResponse{Method: http.MethodGet, StatusCode: http.StatusUnauthorized,
		Errors: errcode.Errors{{Code: errcode.ErrorCodeUnauthorized, Message: "authentication required"}}}
	cases := []struct {
		name  string
		key   string
		setup func(w *world)
		want  error
	}{
		{"resolve", "p256", func(w *world) { w.reg.resolveErr = denied }, denied},
		{"fetch", "p256", func(w *world) {
			w.legacy(w.signLegacy(p256, simpleSigningPayload(w.target.Digest)))
			w.reg.fetchErr = denied
		}, denied},
		{"referrers", "p256", func(w *world) { w.reg.referrersErr = denied }, denied},
		{"fetch of the manifest for an Ed25519 message signature", "ed25519", func(w *world) {
			sum := sha256.Sum256(w.targetBytes())
			w.referrer(bundleMediaType, w.bundleLayer(messageBundle(p256.hint(), sum[:], p256.sign(w.targetBytes()))))
			w.reg.fetchErr, w.reg.failFetch = context.DeadlineExceeded, w.target.Digest
		}, context.DeadlineExceeded},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			tc.setup(w)
			_, err := Verify(t.Context(), w.reg, w.target, []Key{signers()[tc.key].key()})
			var e *Error
			if errors.As(err, &e) {
				t.Fatalf("Verify: %v is an *Error, want the registry's error", err)
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("Verify: %v, want %v", err, tc.want)
			}
			var resp *errcode.ErrorResponse
			if tc.want == error(denied) && !errors.As(err, &resp) {
				t.Fatalf("errors.As does not reach the *errcode.ErrorResponse in %v", err)
			}
		})
	}

	t.Run("context canceled", func(t *testing.T) {
		w := newWorld(t)
		w.legacy(w.signLegacy(p256, simpleSigningPayload(w.target.Digest)))
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := Verify(ctx, w.reg, w.target, []Key{p256.key()}); !errors.Is(err, context.Canceled) {
			t.Fatalf("Verify: %v, want context.Canceled", err)
		}
	})
}

func TestVerifyArguments(t *testing.T) {
	w := newWorld(t)
	p224 := must(ecdsa.GenerateKey(elliptic.P224(), rand.Reader))
	cases := []struct {
		name   string
		reg    Registry
		target ocispec.Descriptor
		keys   []Key
		want   string
	}{
		{"no registry", nil, w.target, []Key{signers()["p256"].key()}, "no registry"},
		{"no keys", w.reg, w.target, nil, "no public key"},
		{"a key of another curve", w.reg, w.target, []Key{{ID: "p224", Public: &p224.PublicKey}}, `key "p224": ECDSA key on P-224`},
		{"a key of another kind", w.reg, w.target, []Key{{ID: "x", Public: "not a key"}}, `key "x": string key`},
		{"an invalid digest", w.reg, ocispec.Descriptor{Digest: "sha256:xyz"}, []Key{signers()["p256"].key()}, "manifest digest"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Verify(t.Context(), tc.reg, tc.target, tc.keys)
			var e *Error
			if err == nil || errors.As(err, &e) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Verify: %v, want a plain error mentioning %q", err, tc.want)
			}
		})
	}
}

// TestPAE checks the encoding against the example of the DSSE
// specification (protocol.md).
func TestPAE(t *testing.T) {
	got := string(pae("http://example.com/HelloWorld", []byte("hello world")))
	if want := "DSSEv1 29 http://example.com/HelloWorld 11 hello world"; got != want {
		t.Fatalf("pae = %q, want %q", got, want)
	}
}

func TestErrorString(t *testing.T) {
	d := "sha256:" + strings.Repeat("ab", 32)
	cases := []struct {
		err  *Error
		want string
	}{
		{&Error{Digest: d, Err: fmt.Errorf("%w: none", ErrUnsigned)}, "cosign: " + d + ": no cosign signature: none"},
		{&Error{Digest: d, Err: fmt.Errorf("%w: x", ErrUnknownKey)}, "cosign: " + d + " (key unknown): not signed by a trusted key: x"},
		{&Error{Digest: d, KeyID: "SHA256:k", Err: fmt.Errorf("%w: y", ErrOtherDigest)}, "cosign: " + d + " (key SHA256:k): signature is for another digest: y"},
	}
	for _, tc := range cases {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}
