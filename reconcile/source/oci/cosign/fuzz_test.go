package cosign

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"encoding/pem"
	"errors"
	"testing"

	"github.com/opencontainers/go-digest"
)

// expand replaces the placeholders of a fuzz input: $D the artifact's
// digest, $H its hex, $T cosign's simple-signing type, $S the in-toto
// statement type, $P cosign's signature predicate type. They keep the
// inputs short, which keeps the fuzzer's minimizing (quadratic in their
// length) quick.
func expand(b []byte, d digest.Digest) []byte {
	for _, r := range [][2]string{{"$D", d.String()}, {"$H", d.Encoded()}, {"$T", cosignSignatureType}, {"$S", statementType}, {"$P", signPredicateType}} {
		b = bytes.ReplaceAll(b, []byte(r[0]), []byte(r[1]))
	}
	return b
}

// FuzzVerify gives Verify payloads of the fuzzer's making (see expand),
// signed here with the key given so that every check past the signature
// is reached: a simple-signing payload (in the signature tag) and an
// in-toto statement (in a DSSE bundle among the referrers). Verify must
// not panic, must fail only with an *Error, and must accept a signature
// only when its payload names the digest.
func FuzzVerify(f *testing.F) {
	key := ecdsaSigner("fuzz", elliptic.P256(), crypto.SHA256)
	f.Add([]byte(`{"critical":{"image":{"docker-manifest-digest":"$D"},"type":"$T"}}`), []byte(`{"_type":"$S","subject":[{"digest":{"sha256":"$H"}}],"predicateType":"$P"}`))
	f.Add([]byte(`{"critical":{"image":{"docker-manifest-digest":"sha256:$H"},"type":"$T"}}`), []byte(`{"_type":"$S","subject":[{"digest":{"sha512":"$H"}},{"digest":{"sha256":"$H"}}],"predicateType":"$P"}`))
	f.Add([]byte(`{"critical":{"type":"$T"},"critical":{"image":{"docker-manifest-digest":"$D"}}}`), []byte(`{"subject":[]}`))
	f.Add([]byte("{"), []byte("null"))
	f.Add([]byte{}, []byte{})

	f.Fuzz(func(t *testing.T, legacyPayload, statement []byte) {
		w := newWorld(t)
		d := w.target.Digest
		legacyPayload, statement = expand(legacyPayload, d), expand(statement, d)
		if len(legacyPayload) > 0 {
			w.legacy(w.signLegacy(key, legacyPayload))
		}
		if len(statement) > 0 {
			w.referrer(bundleMediaType, w.signBundle(key, inTotoPayloadType, statement))
		}
		id, err := Verify(t.Context(), w.reg, w.target, []Key{key.key()})
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Digest != d.String() {
				t.Fatalf("Verify: %v (%T), want an *Error for %s", err, err, d)
			}
			return
		}
		if id != key.key().ID {
			t.Fatalf("Verify = %q, want %q", id, key.key().ID)
		}
		if !hasString(legacyPayload, d.String()) && !hasString(statement, d.Encoded()) {
			t.Fatalf("Verify accepted payloads that do not name %s:\n%q\n%q", d, legacyPayload, statement)
		}
	})
}

// FuzzBundle gives Verify a Sigstore bundle of the fuzzer's making among
// the artifact's referrers, built from its parts: the key hint; kind's two
// low bits choose a DSSE envelope (0), a messageSignature (1), both (2) or
// neither (3), the next two the certificate in the verification material
// (none, another key's, the key's, junk); the payload (see expand); the
// messageDigest. When signed is set the key signs what the bundle says
// (the PAE of the envelope, or a SHA2_256 messageDigest); otherwise the
// signature is junk, and the fuzzer cannot forge one. Verify must not
// panic, must fail only with an *Error, and must accept only a statement
// naming the digest or a messageDigest that is the manifest's.
func FuzzBundle(f *testing.F) {
	key := ecdsaSigner("fuzz", elliptic.P256(), crypto.SHA256)
	certs := [][]byte{nil, pemBody(selfSigned(ed25519Signer("stranger", 8, false))), pemBody(selfSigned(key)), []byte("junk")}
	w := newWorld(f)
	sum := sha256.Sum256(w.targetBytes())
	statement := []byte(`{"_type":"$S","subject":[{"digest":{"sha256":"$H"}}],"predicateType":"$P"}`)
	f.Add(key.hint(), uint8(0), inTotoPayloadType, statement, "", []byte{}, true)
	f.Add(key.hint(), uint8(0), inTotoPayloadType, statement, "", []byte{}, false)
	f.Add("SHA256:x", uint8(1|1<<2), "", []byte{}, "SHA2_256", sum[:], true)
	f.Add("", uint8(1|2<<2), "", []byte{}, "SHA2_512", sum[:], false)
	f.Add("", uint8(2|3<<2), "x", []byte("{}"), "SHA2_384", []byte{}, true)
	f.Fuzz(func(t *testing.T, hint string, kind uint8, payloadType string, payload []byte, alg string, sum []byte, signed bool) {
		w := newWorld(t)
		d := w.target.Digest
		payload = expand(payload, d)
		vm := map[string]any{"publicKey": map[string]any{"hint": hint}}
		if cert := certs[kind>>2&3]; cert != nil {
			vm = map[string]any{"certificate": map[string]any{"rawBytes": cert}}
		}
		b := map[string]any{"mediaType": bundleMediaType, "verificationMaterial": vm}
		content := kind & 3
		if content == 0 || content == 2 {
			sig := []byte("junk")
			if signed {
				sig = key.sign(pae(payloadType, payload))
			}
			b["dsseEnvelope"] = map[string]any{"payload": payload, "payloadType": payloadType, "signatures": []any{map[string]any{"sig": sig}}}
		}
		if content == 1 || content == 2 {
			sig := []byte("junk")
			if signed && alg == "SHA2_256" && len(sum) == sha256.Size {
				sig = must(ecdsa.SignASN1(rand.Reader, key.priv.(*ecdsa.PrivateKey), sum))
			}
			b["messageSignature"] = map[string]any{"messageDigest": map[string]any{"algorithm": alg, "digest": sum}, "signature": sig}
		}
		w.referrer("", w.bundleLayer(must(json.Marshal(b))))
		_, err := Verify(t.Context(), w.reg, w.target, []Key{key.key()})
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Verify: %v (%T), want an *Error", err, err)
			}
			return
		}
		manifest := sha256.Sum256(w.targetBytes())
		if !(content == 0 && hasString(payload, d.Encoded())) && !(content == 1 && bytes.Equal(sum, manifest[:])) {
			t.Fatalf("Verify accepted a bundle that does not name %s: kind %d, payload %q, messageDigest %x", d, kind, payload, sum)
		}
	})
}

// hasString reports whether the JSON document doc holds the string s,
// anywhere (duplicate keys included): what a payload that names a digest
// must at least do.
func hasString(doc []byte, s string) bool {
	dec := json.NewDecoder(bytes.NewReader(doc))
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		if tok == s {
			return true
		}
	}
}

// pemBody is the DER inside a PEM block.
func pemBody(b []byte) []byte {
	block, _ := pem.Decode(b)
	return block.Bytes
}

// FuzzParseKeys gives ParseKeys any text: it must not panic, and what it
// accepts is at least one key, each of a kind Verify uses, with its ID.
func FuzzParseKeys(f *testing.F) {
	for _, s := range signers() {
		f.Add(s.pem())
	}
	f.Add(append(signers()["p256"].pem(), signers()["ed25519"].pem()...))
	f.Add([]byte("-----BEGIN PUBLIC KEY-----\n-----END PUBLIC KEY-----\n"))
	f.Add(selfSigned(signers()["p256"]))
	f.Fuzz(func(t *testing.T, data []byte) {
		keys, err := ParseKeys(data)
		if err != nil {
			if len(keys) > 0 {
				t.Fatalf("ParseKeys returned keys with error %v", err)
			}
			return
		}
		if len(keys) == 0 {
			t.Fatal("ParseKeys accepted no key")
		}
		for _, k := range keys {
			checked, err := newKey(k.Public)
			if err != nil || checked.ID != k.ID {
				t.Fatalf("key %s: %v, ID %s", k.ID, err, checked.ID)
			}
		}
	})
}
