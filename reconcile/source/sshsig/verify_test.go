package sshsig

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

var message = []byte("tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\nauthor A <a@example.com> 1700000000 +0000\ncommitter A <a@example.com> 1700000000 +0000\n\nrelease\n")

// Signatures ssh-keygen makes, with every key type it makes without
// hardware and both hash algorithms, verify; the key id is the
// fingerprint ssh-keygen prints.
func TestVerifySSHKeygen(t *testing.T) {
	dir := t.TempDir()
	var keys []testKey
	var allowed strings.Builder
	for _, typ := range []string{"ed25519", "ecdsa", "rsa"} {
		k := keygen(t, dir, typ, typ)
		keys = append(keys, k)
		fmt.Fprintf(&allowed, "%s@example.com %s\n", typ, k.line())
	}
	signers := mustAllowed(t, allowed.String())
	for i, k := range keys {
		fields := strings.Fields(run(t, nil, keygenPath(t), "-l", "-f", k.priv+".pub"))
		if got := ssh.FingerprintSHA256(k.pub); len(fields) < 2 || got != fields[1] {
			t.Errorf("%s: FingerprintSHA256 = %s, ssh-keygen -l says %v", k.name, got, fields)
		}
		for _, hash := range []string{"sha512", "sha256"} {
			t.Run(k.name+" "+hash, func(t *testing.T) {
				armored := k.sign(t, GitNamespace, message, "-O", "hashalg="+hash)
				sig, err := Parse(armored)
				if err != nil {
					t.Fatal(err)
				}
				if sig.HashAlgorithm != hash || sig.Namespace != GitNamespace || !bytes.Equal(sig.Key.Marshal(), k.pub.Marshal()) {
					t.Errorf("Parse() = %s %s %s, want %s %s %s", sig.HashAlgorithm, sig.Namespace, ssh.FingerprintSHA256(sig.Key), hash, GitNamespace, ssh.FingerprintSHA256(k.pub))
				}
				signer, err := sig.Verify(message, GitNamespace, signers, time.Unix(1_700_000_000, 0))
				if err != nil {
					t.Fatalf("Verify() = %v", err)
				}
				if signer.Line != i+1 {
					t.Errorf("Verify() matched line %d, want %d", signer.Line, i+1)
				}
				if _, err := sig.Verify(append(bytes.Clone(message), ' '), GitNamespace, signers, time.Unix(1_700_000_000, 0)); !errors.Is(err, ErrBadSignature) {
					t.Errorf("Verify() of another message = %v, want ErrBadSignature", err)
				}
			})
		}
	}
}

// TestVerify runs every check of Verify, each with the case that fails
// without it.
func TestVerify(t *testing.T) {
	dir := t.TempDir()
	alice := keygen(t, dir, "alice", "ed25519")
	stranger := keygen(t, dir, "stranger", "ed25519")
	windowed := keygen(t, dir, "windowed", "ed25519")
	files := keygen(t, dir, "files", "ed25519")
	star := keygen(t, dir, "star", "ed25519")
	notGit := keygen(t, dir, "notgit", "ed25519")
	twice := keygen(t, dir, "twice", "ed25519")
	rsa := keygen(t, dir, "rsa", "rsa")
	rsaSigner := loadSigner(t, rsa)
	aliceSigner := loadSigner(t, alice)
	allowed := mustAllowed(t, strings.Join([]string{
		"alice@example.com " + alice.line(),                                                   // 1
		`"windowed user" valid-after="20230101Z",valid-before="20231101Z" ` + windowed.line(), // 2
		`files namespaces="file,email" ` + files.line(),                                       // 3
		`star namespaces="*,!email" ` + star.line(),                                           // 4
		`notgit namespaces="*,!git" ` + notGit.line(),                                         // 5
		`twice namespaces="file" ` + twice.line(),                                             // 6
		`twice valid-before="20200101Z" ` + twice.line(),                                      // 7
		"rsa@example.com " + rsa.line(),                                                       // 8
	}, "\n"))
	nov14 := time.Unix(1_700_000_000, 0) // 2023-11-14T22:13:20Z
	jun := time.Date(2023, 6, 1, 12, 0, 0, 0, time.UTC)
	before := time.Date(2023, 11, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		armored []byte
		message []byte // message when nil
		at      time.Time
		err     error // nil: verifies
		line    int   // the line that allows it, when it verifies
		msg     string
	}{
		{name: "trusted", armored: alice.sign(t, "git", message), at: nov14, line: 1},
		{name: "other message", armored: alice.sign(t, "git", message), message: []byte("tree 0\n"), at: nov14,
			err: ErrBadSignature, msg: "bad signature: it does not match the signed message"},
		{name: "namespace file", armored: alice.sign(t, "file", message), at: nov14,
			err: ErrBadSignature, msg: `bad signature: it is made for namespace "file", not "git"`},
		{name: "unknown key", armored: stranger.sign(t, "git", message), at: nov14, err: ErrUnknownKey},
		{name: "inside window", armored: windowed.sign(t, "git", message), at: jun, line: 2},
		{name: "at valid-before", armored: windowed.sign(t, "git", message), at: before, line: 2},
		{name: "after valid-before", armored: windowed.sign(t, "git", message), at: before.Add(time.Second), err: ErrNotAllowed,
			msg: "line 2 allows the key only until 2023-11-01T00:00:00Z (valid-before), not at 2023-11-01T00:00:01Z"},
		{name: "before valid-after", armored: windowed.sign(t, "git", message), at: time.Date(2022, 12, 31, 23, 59, 59, 0, time.UTC), err: ErrNotAllowed,
			msg: "line 2 allows the key only from 2023-01-01T00:00:00Z (valid-after), not at 2022-12-31T23:59:59Z"},
		{name: "namespaces without git", armored: files.sign(t, "git", message), at: nov14, err: ErrNotAllowed,
			msg: `line 3 allows the key only for namespaces "file,email", not "git"`},
		{name: "namespaces by pattern", armored: star.sign(t, "git", message), at: nov14, line: 4},
		{name: "namespaces excluding git", armored: notGit.sign(t, "git", message), at: nov14, err: ErrNotAllowed,
			msg: `line 5 allows the key only for namespaces "*,!git", not "git"`},
		{name: "every line refuses", armored: twice.sign(t, "git", message), at: nov14, err: ErrNotAllowed,
			msg: `line 6 allows the key only for namespaces "file", not "git"; line 7 allows the key only until 2020-01-01T00:00:00Z (valid-before), not at 2023-11-14T22:13:20Z`},
		{name: "rsa-sha2-512", armored: rsa.sign(t, "git", message), at: nov14, line: 8},
		{name: "rsa-sha2-256", armored: armor(goSign(t, rsaSigner, ssh.KeyAlgoRSASHA256, "git", "sha512", message).bytes()), at: nov14, line: 8},
		{name: "ssh-rsa (SHA-1)", armored: armor(goSign(t, rsaSigner, ssh.KeyAlgoRSA, "git", "sha512", message).bytes()), at: nov14,
			err: ErrUnsupported, msg: "signature algorithm ssh-rsa hashes with SHA-1 and is refused"},
		{name: "hash md5", armored: armor(goSign(t, aliceSigner, "", "git", "md5", message).bytes()), at: nov14,
			err: ErrUnsupported, msg: `hash algorithm "md5" (want sha256 or sha512)`},
		{name: "hash SHA256 in capitals", armored: armor(goSign(t, aliceSigner, "", "git", "SHA256", message).bytes()), at: nov14,
			err: ErrUnsupported, msg: `hash algorithm "SHA256"`},
		{name: "signature of another key type", armored: armor(func() []byte {
			b := goSign(t, aliceSigner, "", "git", "sha512", message)
			b.sig = goSign(t, rsaSigner, ssh.KeyAlgoRSASHA512, "git", "sha512", message).sig
			return b.bytes()
		}()), at: nov14, err: ErrUnsupported, msg: `signature algorithm "rsa-sha2-512" for a ssh-ed25519 key`},
		{name: "reserved field ignored", armored: armor(func() []byte {
			b := goSign(t, aliceSigner, "", "git", "sha512", message)
			b.reserved = "future"
			return b.bytes()
		}()), at: nov14, line: 1},
		{name: "signature of another message", armored: armor(func() []byte {
			b := goSign(t, aliceSigner, "", "git", "sha512", message)
			b.hashAlg = "sha256"
			return b.bytes()
		}()), at: nov14, err: ErrBadSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sig, err := Parse(tt.armored)
			if err != nil {
				t.Fatalf("Parse() = %v", err)
			}
			msg := message
			if tt.message != nil {
				msg = tt.message
			}
			signer, err := sig.Verify(msg, GitNamespace, allowed, tt.at)
			if tt.err == nil {
				if err != nil {
					t.Fatalf("Verify() = %v, want it verified", err)
				}
				if signer.Line != tt.line {
					t.Errorf("Verify() matched line %d, want %d", signer.Line, tt.line)
				}
				return
			}
			if !errors.Is(err, tt.err) {
				t.Fatalf("Verify() = %v, want %v", err, tt.err)
			}
			if signer != nil {
				t.Errorf("Verify() returned a signer with its error")
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("Verify() = %q, want it to contain %q", err, tt.msg)
			}
		})
	}
}

// TestParseHostile feeds Parse what an attacker may put in a commit.
func TestParseHostile(t *testing.T) {
	signer := fixedSigner(t, 1)
	good := goSign(t, signer, "", "git", "sha512", message)
	with := func(f func(*blob)) []byte {
		b := good
		f(&b)
		return armor(b.bytes())
	}
	huge := func(field int) []byte {
		// The field-th string of the blob claims 4 GiB.
		raw := good.bytes()
		off := len(magic) + 4
		for i := 0; i < field; i++ {
			off += 4 + int(uint32(raw[off])<<24|uint32(raw[off+1])<<16|uint32(raw[off+2])<<8|uint32(raw[off+3]))
		}
		raw = bytes.Clone(raw)
		copy(raw[off:], []byte{0xff, 0xff, 0xff, 0xff})
		return armor(raw)
	}
	ca := fixedSigner(t, 9)
	cert := &ssh.Certificate{Key: signer.PublicKey(), CertType: ssh.UserCert, ValidPrincipals: []string{"a"}, ValidBefore: ssh.CertTimeInfinity}
	if err := cert.SignCert(rand.Reader, ca); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		armored []byte
		err     error
		msg     string
	}{
		{"empty", nil, ErrMalformed, "does not start with"},
		{"openpgp", []byte("-----BEGIN PGP SIGNATURE-----\n\nAAAA\n-----END PGP SIGNATURE-----\n"), ErrMalformed, "does not start with"},
		{"no footer", armor(good.bytes())[:100], ErrMalformed, "does not end with"},
		{"header not a line", []byte(armorBegin + "AAAA\n" + armorEnd), ErrMalformed, "not lines of their own"},
		{"footer not a line", []byte(armorBegin + "\nAAAA" + armorEnd), ErrMalformed, "not lines of their own"},
		{"bad base64", []byte(armorBegin + "\n!!!!\n" + armorEnd + "\n"), ErrMalformed, "not valid base64"},
		{"two signatures", append(armor(good.bytes()), armor(good.bytes())...), ErrMalformed, "not valid base64"},
		{"too big", append(armor(good.bytes()), bytes.Repeat([]byte("\n"), MaxSignatureBytes)...), ErrMalformed, "more than the limit"},
		{"no blob", []byte(armorBegin + "\n\n" + armorEnd), ErrMalformed, `does not start with "SSHSIG"`},
		{"wrong magic", with(func(b *blob) { b.magic = "SSHSIH" }), ErrMalformed, `does not start with "SSHSIG"`},
		{"short magic", armor([]byte("SSH")), ErrMalformed, `does not start with "SSHSIG"`},
		{"no version", armor([]byte("SSHSIG\x00\x00")), ErrMalformed, "ends before its version"},
		{"version 0", with(func(b *blob) { b.version = 0 }), ErrMalformed, "version 0, want 1"},
		{"version 2", with(func(b *blob) { b.version = 2 }), ErrUnsupported, "version 2, newer than the supported 1"},
		{"version 2^32-1", with(func(b *blob) { b.version = 1<<32 - 1 }), ErrUnsupported, "version 4294967295"},
		{"huge key", huge(0), ErrMalformed, "public key of 4294967295 bytes, but only"},
		{"huge namespace", huge(1), ErrMalformed, "namespace of 4294967295 bytes"},
		{"huge reserved", huge(2), ErrMalformed, "reserved field of 4294967295 bytes"},
		{"huge hash algorithm", huge(3), ErrMalformed, "hash algorithm of 4294967295 bytes"},
		{"huge signature", huge(4), ErrMalformed, "signature of 4294967295 bytes"},
		{"truncated", armor(good.bytes()[:40]), ErrMalformed, "but only"},
		{"ends before the signature", armor(good.bytes()[:len(good.bytes())-len(good.sig)-4]), ErrMalformed, "ends before its signature"},
		{"trailing bytes", with(func(b *blob) { b.trailing = []byte{0} }), ErrMalformed, "1 bytes after the signature"},
		{"garbage key", with(func(b *blob) { b.key = []byte("\x00\x00\x00\x0bssh-ed25519\x00\x00\x00\x01x") }), ErrMalformed, "public key:"},
		{"unknown key type", with(func(b *blob) { b.key = []byte("\x00\x00\x00\x07ssh-foo") }), ErrMalformed, "public key:"},
		{"certificate", with(func(b *blob) { b.key = cert.Marshal() }), ErrUnsupported, "signed with a certificate"},
		{"empty namespace", with(func(b *blob) { b.namespace = "" }), ErrMalformed, "empty namespace"},
		{"garbage signature", with(func(b *blob) { b.sig = []byte("x") }), ErrMalformed, "signature:"},
		{"huge inner length", with(func(b *blob) { b.sig = []byte("\xff\xff\xff\xffssh-ed25519") }), ErrMalformed, "signature:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sig, err := Parse(tt.armored)
			if !errors.Is(err, tt.err) {
				t.Fatalf("Parse() = %v, %v; want %v", sig, err, tt.err)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("Parse() = %q, want it to contain %q", err, tt.msg)
			}
		})
	}
	// What Parse accepts around the armor: white space, CRLF, any line
	// length.
	raw := good.bytes()
	b64 := []byte(strings.ReplaceAll(string(armor(raw)), "\n", "\r\n"))
	for name, armored := range map[string][]byte{
		"CRLF":            b64,
		"spaces around":   append(append([]byte("\n  "), armor(raw)...), " \n\n"...),
		"one long line":   []byte(armorBegin + "\n" + strings.ReplaceAll(string(armor(raw)[len(armorBegin)+1:len(armor(raw))-len(armorEnd)-1]), "\n", "") + "\n" + armorEnd),
		"no final return": bytes.TrimSuffix(armor(raw), []byte("\n")),
	} {
		if _, err := Parse(armored); err != nil {
			t.Errorf("%s: Parse() = %v", name, err)
		}
	}
	if !IsArmored([]byte("\n"+armorBegin)) || IsArmored([]byte("-----BEGIN PGP SIGNATURE-----")) {
		t.Error("IsArmored is wrong")
	}
}

// TestVerifyAgreesWithSSHKeygen checks the options of allowed-signers
// lines against `ssh-keygen -Y verify` with the same file and time.
func TestVerifyAgreesWithSSHKeygen(t *testing.T) {
	dir := t.TempDir()
	k := keygen(t, dir, "k", "ed25519")
	armored := k.sign(t, GitNamespace, message)
	sigFile := filepath.Join(dir, "msg.sig")
	if err := os.WriteFile(sigFile, armored, 0o600); err != nil {
		t.Fatal(err)
	}
	sig, err := Parse(armored)
	if err != nil {
		t.Fatal(err)
	}
	// The signature is checked at 2023-11-14T22:13:20Z.
	options := []struct {
		opt  string
		want bool // accepted
	}{
		{"", true}, {`namespaces="git"`, true}, {`namespaces="file"`, false}, {`namespaces="*"`, true},
		{`namespaces="g?t"`, true}, {`namespaces="*,!git"`, false}, {`namespaces="!file,git"`, true},
		{`namespaces=""`, false}, {`NameSpaces="git"`, true},
		{`valid-after="20231114Z"`, true}, {`valid-after="20231115Z"`, false},
		{`valid-after="20231114221320Z"`, true}, {`valid-after="20231114221321Z"`, false},
		{`valid-before="20231114221320Z"`, true}, {`valid-before="20231114221319Z"`, false},
		{`valid-before="202311142213Z"`, false},
		{`valid-after="20231101",valid-before="20231201"`, true}, {`valid-after="20230101UTC",namespaces="git"`, true},
	}
	at := time.Unix(1_700_000_000, 0)
	for _, o := range options {
		t.Run(o.opt, func(t *testing.T) {
			line := "p@example.com " + strings.TrimSpace(o.opt+" "+k.line())
			allowedFile := filepath.Join(t.TempDir(), "allowed")
			if err := os.WriteFile(allowedFile, []byte(line+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(keygenPath(t), "-Y", "verify", "-f", allowedFile, "-I", "p@example.com", "-n", GitNamespace,
				"-s", sigFile, "-Overify-time=20231114221320Z")
			cmd.Stdin = bytes.NewReader(message)
			out, kgErr := cmd.CombinedOutput()
			_, err := sig.Verify(message, GitNamespace, mustAllowed(t, line), at)
			if (kgErr == nil) != o.want || (err == nil) != o.want {
				t.Errorf("accepted: want %v; ssh-keygen -Y verify: %v (%s); Verify: %v", o.want, kgErr, bytes.TrimSpace(out), err)
			}
		})
	}
}
