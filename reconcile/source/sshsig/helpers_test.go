package sshsig

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

// testKey is a key pair made by ssh-keygen.
type testKey struct {
	name string
	priv string // the private key's file
	pub  ssh.PublicKey
}

// keygenPath is ssh-keygen, or skips the test when there is none.
func keygenPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("ssh-keygen")
	if err != nil {
		t.Skip("no ssh-keygen")
	}
	return p
}

// keygen makes a key pair of type typ ("ed25519", "ecdsa", "rsa") with
// ssh-keygen in dir.
func keygen(t *testing.T, dir, name, typ string) testKey {
	t.Helper()
	priv := filepath.Join(dir, name)
	args := []string{"-q", "-t", typ, "-N", "", "-C", name + "@example.com", "-f", priv}
	if typ == "rsa" {
		args = append(args, "-b", "2048")
	}
	run(t, nil, keygenPath(t), args...)
	line, err := os.ReadFile(priv + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey(line)
	if err != nil {
		t.Fatal(err)
	}
	return testKey{name: name, priv: priv, pub: pub}
}

// line is k in an allowed-signers line's form: keytype base64key.
func (k testKey) line() string { return authorized(k.pub) }

func authorized(pub ssh.PublicKey) string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))
}

// sign signs msg with `ssh-keygen -Y sign -n namespace` and returns the
// armored signature; extra goes before -f (such as -O hashalg=sha256).
func (k testKey) sign(t *testing.T, namespace string, msg []byte, extra ...string) []byte {
	t.Helper()
	file := filepath.Join(t.TempDir(), "msg")
	if err := os.WriteFile(file, msg, 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"-q", "-Y", "sign", "-n", namespace}, extra...)
	run(t, nil, keygenPath(t), append(args, "-f", k.priv, file)...)
	sig, err := os.ReadFile(file + ".sig")
	if err != nil {
		t.Fatal(err)
	}
	return sig
}

// run runs a command, with stdin when not nil, and returns its output.
func run(t *testing.T, stdin []byte, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// blob is an SSHSIG blob field by field, to build hostile ones.
type blob struct {
	magic     string
	version   uint32
	key       []byte
	namespace string
	reserved  string
	hashAlg   string
	sig       []byte
	trailing  []byte
}

func (b blob) bytes() []byte {
	out := []byte(b.magic)
	out = binary.BigEndian.AppendUint32(out, b.version)
	for _, s := range [][]byte{b.key, []byte(b.namespace), []byte(b.reserved), []byte(b.hashAlg), b.sig} {
		out = binary.BigEndian.AppendUint32(out, uint32(len(s)))
		out = append(out, s...)
	}
	return append(out, b.trailing...)
}

// armor wraps raw as ssh-keygen does: base64 in lines of 70.
func armor(raw []byte) []byte {
	b64 := base64.StdEncoding.EncodeToString(raw)
	var out strings.Builder
	out.WriteString(armorBegin + "\n")
	for len(b64) > 70 {
		out.WriteString(b64[:70] + "\n")
		b64 = b64[70:]
	}
	out.WriteString(b64 + "\n" + armorEnd + "\n")
	return []byte(out.String())
}

// goSign signs msg like ssh-keygen, but in Go, with any signature
// algorithm ("" for the key's default) and any hash algorithm name (an
// unknown one hashes with SHA-256).
func goSign(t testing.TB, signer ssh.Signer, algorithm, namespace, hashAlg string, msg []byte) blob {
	t.Helper()
	var digest []byte
	if hashAlg == "sha512" {
		h := sha512.Sum512(msg)
		digest = h[:]
	} else {
		h := sha256.Sum256(msg)
		digest = h[:]
	}
	data := signedData(namespace, hashAlg, digest)
	var sig *ssh.Signature
	var err error
	if algorithm == "" {
		sig, err = signer.Sign(rand.Reader, data)
	} else {
		sig, err = signer.(ssh.AlgorithmSigner).SignWithAlgorithm(rand.Reader, data, algorithm)
	}
	if err != nil {
		t.Fatal(err)
	}
	return blob{magic: magic, version: version, key: signer.PublicKey().Marshal(), namespace: namespace, hashAlg: hashAlg, sig: ssh.Marshal(sig)}
}

// fixedSigner is an Ed25519 key that is the same at every run, so that
// fuzz seeds are too.
func fixedSigner(t testing.TB, seed byte) ssh.Signer {
	t.Helper()
	s, err := ssh.NewSignerFromKey(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// loadSigner reads the private key of k.
func loadSigner(t *testing.T, k testKey) ssh.Signer {
	t.Helper()
	pem, err := os.ReadFile(k.priv)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.ParsePrivateKey(pem)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustAllowed(t *testing.T, text string) *AllowedSigners {
	t.Helper()
	a, err := ParseAllowedSigners([]byte(text))
	if err != nil {
		t.Fatalf("ParseAllowedSigners:\n%s\n%v", text, err)
	}
	return a
}
