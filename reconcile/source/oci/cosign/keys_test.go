package cosign

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"
)

func pemOf(typ string, der []byte, headers map[string]string) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der, Headers: headers})
}

func TestParseKeys(t *testing.T) {
	sg := signers()
	p256, p384, ed, rs := sg["p256"], sg["p384"], sg["ed25519"], sg["rsa"]
	spki := func(pub any) []byte { return must(x509.MarshalPKIXPublicKey(pub)) }
	p224 := must(ecdsa.GenerateKey(elliptic.P224(), rand.Reader))
	p521 := must(ecdsa.GenerateKey(elliptic.P521(), rand.Reader))
	rsa1024 := must(rsa.GenerateKey(rand.Reader, 1024))
	join := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

	cases := []struct {
		name    string
		in      []byte
		want    []signer // the keys, in order
		wantErr string
	}{
		{name: "one ECDSA P-256 key (cosign.pub)", in: p256.pem(), want: []signer{p256}},
		{name: "keys of every kind", in: join(p256.pem(), p384.pem(), ed.pem(), rs.pem()), want: []signer{p256, p384, ed, rs}},
		{name: "blank lines and CRLF between blocks", in: join([]byte("\n\n"), bytes.ReplaceAll(p256.pem(), []byte("\n"), []byte("\r\n")), []byte("\r\n\t \n"), ed.pem(), []byte("\n")), want: []signer{p256, ed}},
		{name: "a key listed twice is kept once", in: join(p256.pem(), ed.pem(), p256.pem()), want: []signer{p256, ed}},

		{name: "empty", in: nil, wantErr: "no PEM block"},
		{name: "white space only", in: []byte(" \n\t\n"), wantErr: "no PEM block"},
		{name: "text before the first block", in: join([]byte("my key:\n"), p256.pem()), wantErr: `text before the first block is not a PEM block: "my key:"`},
		{name: "text between blocks", in: join(p256.pem(), []byte("# second\n"), ed.pem()), wantErr: "text after block 1 is not a PEM block"},
		{name: "text after the last block", in: join(p256.pem(), ed.pem(), []byte("trailing")), wantErr: "text after block 2 is not a PEM block"},
		{name: "a PKCS #1 RSA key", in: join(p256.pem(), pemOf("RSA PUBLIC KEY", x509.MarshalPKCS1PublicKey(&rs.priv.(*rsa.PrivateKey).PublicKey), nil)), wantErr: `block 2 is a "RSA PUBLIC KEY" block, want "PUBLIC KEY"`},
		{name: "a private key", in: pemOf("PRIVATE KEY", must(x509.MarshalPKCS8PrivateKey(p256.priv)), nil), wantErr: `block 1 is a "PRIVATE KEY" block`},
		{name: "a certificate", in: selfSigned(p256), wantErr: `block 1 is a "CERTIFICATE" block`},
		{name: "an ECDSA key on P-224", in: pemOf("PUBLIC KEY", spki(&p224.PublicKey), nil), wantErr: "block 1: ECDSA key on P-224: only P-256 and P-384"},
		{name: "an ECDSA key on P-521", in: join(ed.pem(), pemOf("PUBLIC KEY", spki(&p521.PublicKey), nil)), wantErr: "block 2: ECDSA key on P-521"},
		{name: "an RSA key of 1024 bits", in: pemOf("PUBLIC KEY", spki(&rsa1024.PublicKey), nil), wantErr: "block 1: RSA key of 1024 bits: at least 2048"},
		{name: "headers", in: pemOf("PUBLIC KEY", spki(p256.priv.Public()), map[string]string{"Proc-Type": "4,ENCRYPTED"}), wantErr: "block 1 has PEM headers"},
		{name: "not base64", in: []byte("-----BEGIN PUBLIC KEY-----\n!!!!\n-----END PUBLIC KEY-----\n"), wantErr: "block 1: malformed PEM block"},
		{name: "not DER", in: pemOf("PUBLIC KEY", []byte("not a key"), nil), wantErr: "block 1 is not a PKIX public key"},
		{name: "DER with trailing bytes", in: pemOf("PUBLIC KEY", append(spki(p256.priv.Public()), 0), nil), wantErr: "block 1 is not a PKIX public key"},
		{name: "no END line", in: []byte("-----BEGIN PUBLIC KEY-----\nAAAA\n"), wantErr: "block 1: no -----END line"},
		{name: "END of another type", in: []byte("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"), wantErr: "block 1: malformed PEM block"},
		{name: "a block opened inside another", in: join([]byte("-----BEGIN X-----\n"), p256.pem()), wantErr: "block 1: block starting \"-----BEGIN X-----\" has no -----END line"},
		{name: "a second, broken block", in: join(p256.pem(), []byte("-----BEGIN PUBLIC KEY-----\nAAAA\n")), wantErr: "block 2: no -----END line"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			keys, err := ParseKeys(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseKeys: %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseKeys: %v", err)
			}
			if len(keys) != len(tc.want) {
				t.Fatalf("ParseKeys gave %d keys, want %d", len(keys), len(tc.want))
			}
			for i, k := range keys {
				want := tc.want[i].key()
				if k.ID != want.ID || !want.Public.(interface{ Equal(crypto.PublicKey) bool }).Equal(k.Public) {
					t.Errorf("key %d = %s %T, want %s (%s)", i, k.ID, k.Public, want.ID, tc.want[i].name)
				}
			}
		})
	}
}

// TestKeyID checks the ID's form, and that it is cosign's bundle hint
// with the padding left off.
func TestKeyID(t *testing.T) {
	for _, s := range signers() {
		k := s.key()
		if !strings.HasPrefix(k.ID, "SHA256:") || len(k.ID) != len("SHA256:")+43 {
			t.Errorf("%s: ID %q is not SHA256: and 43 base64 characters", s.name, k.ID)
		}
		if want := "SHA256:" + strings.TrimRight(s.hint(), "="); k.ID != want {
			t.Errorf("%s: ID %q, want cosign's hint %q unpadded", s.name, k.ID, s.hint())
		}
	}
}
