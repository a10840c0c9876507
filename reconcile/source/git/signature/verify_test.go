package signature_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	pgperrors "github.com/ProtonMail/go-crypto/openpgp/errors"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"recond.dev/recond/reconcile/source/git/signature"
	"recond.dev/recond/reconcile/source/git/signature/sigtest"
	"recond.dev/recond/reconcile/source/sshsig"
)

func parseKeys(t *testing.T, file string) *signature.Keys {
	t.Helper()
	keys, err := signature.ParseKeys(sigtest.Read(t, "keys", file))
	if err != nil {
		t.Fatalf("ParseKeys(keys/%s) = %v", file, err)
	}
	return keys
}

// signed is what a signature check reads of a fixture object.
type signed struct {
	commit, tag string // the commit (the tag's target for a tag), the tag's name
	armored     string
	payload     []byte
	when        time.Time // the committer's or tagger's date
	obj         object.Object
}

func readSigned(t *testing.T, name string) signed {
	t.Helper()
	var s signed
	var encode func(plumbing.EncodedObject) error
	switch o := sigtest.Object(t, name).(type) {
	case *object.Commit:
		s = signed{commit: o.Hash.String(), armored: o.PGPSignature, when: o.Committer.When, obj: o}
		encode = o.EncodeWithoutSignature
	case *object.Tag:
		s = signed{commit: o.Target.String(), tag: o.Name, armored: o.PGPSignature, when: o.Tagger.When, obj: o}
		encode = o.EncodeWithoutSignature
	default:
		t.Fatalf("object %s is a %T", name, o)
	}
	var payload plumbing.MemoryObject
	if err := encode(&payload); err != nil {
		t.Fatal(err)
	}
	r, err := payload.Reader()
	if err != nil {
		t.Fatal(err)
	}
	if s.payload, err = io.ReadAll(r); err != nil {
		t.Fatal(err)
	}
	return s
}

// verify checks the object with VerifyCommit or VerifyTag.
func (s signed) verify(keys *signature.Keys) error {
	if tag, ok := s.obj.(*object.Tag); ok {
		return keys.VerifyTag(tag, s.commit)
	}
	return keys.VerifyCommit(s.obj.(*object.Commit))
}

// TestVerify runs every case of the table on its object, through
// VerifyCommit or VerifyTag and through Verify on the payload.
func TestVerify(t *testing.T) {
	covered := map[string]bool{}
	for _, tc := range sigtest.Cases() {
		covered[tc.Name] = true
		t.Run(tc.Name+" with "+tc.KeysFile(), func(t *testing.T) {
			keys := parseKeys(t, tc.KeysFile())
			s := readSigned(t, tc.Name)
			var wantKey string
			if tc.Key != "" {
				wantKey = sigtest.KeyID(t, tc.Key)
			}

			keyID, err := keys.Verify(s.payload, s.armored, s.when)
			if keyID != wantKey || (tc.Err == nil) != (err == nil) || (tc.Err != nil && !errors.Is(err, tc.Err)) {
				t.Errorf("Verify() = %q, %v; want %q, %v", keyID, err, wantKey, tc.Err)
			}

			err = s.verify(keys)
			if tc.Err == nil {
				if err != nil {
					t.Fatalf("verified = %v, want it accepted", err)
				}
				return
			}
			var se *signature.Error
			if !errors.As(err, &se) {
				t.Fatalf("verified = %v, want a *signature.Error", err)
			}
			got := signature.Error{Commit: se.Commit, Tag: se.Tag, KeyID: se.KeyID, Signer: se.Signer}
			want := signature.Error{Commit: s.commit, Tag: s.tag, KeyID: wantKey, Signer: "Test <test@example.com>"}
			if got != want {
				t.Errorf("Error = %+v, want %+v", got, want)
			}
			if !errors.Is(err, tc.Err) {
				t.Errorf("error = %v, want one matching %v", err, tc.Err)
			}
			what := "commit " + s.commit[:12]
			if s.tag != "" {
				what = fmt.Sprintf("tag %q (commit %s)", s.tag, s.commit[:12])
			}
			msg := err.Error()
			if prefix := what + ` by "Test <test@example.com>"`; !strings.HasPrefix(msg, prefix) {
				t.Errorf("error %q does not start with %q", msg, prefix)
			}
			if !strings.Contains(msg, wantKey) || !strings.Contains(msg, tc.Msg) {
				t.Errorf("error %q does not name key %q or contain %q", msg, wantKey, tc.Msg)
			}
		})
	}
	for _, name := range sigtest.Names(t) {
		if !covered[name] {
			t.Errorf("object %s is in no case", name)
		}
	}
}

// A commit with two signatures is refused, as go-git's Commit.Verify
// refuses it: which of them counts would be a guess.
func TestVerifyCommitTwoSignatures(t *testing.T) {
	c := *sigtest.Object(t, "pgp-good").(*object.Commit)
	c.PGPSignature += c.PGPSignature
	err := parseKeys(t, "trusted").VerifyCommit(&c)
	if !errors.Is(err, object.ErrMultipleSignatures) {
		t.Fatalf("VerifyCommit() = %v, want %v", err, object.ErrMultipleSignatures)
	}
}

// git itself (verify-commit, verify-tag, with the same allowed signers)
// accepts what the table accepts and refuses what it refuses. The OpenPGP
// cases are left out: git would need gpg and a keyring.
func TestVerifyAgreesWithGit(t *testing.T) {
	for _, bin := range []string{"git", "ssh-keygen"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("no %s", bin)
		}
	}
	dir := t.TempDir()
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	hashes := sigtest.Store(t, repo.Storer)
	env := append(os.Environ(), "HOME="+t.TempDir(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	allowed := sigtest.Path("keys", "allowed_signers")
	for _, tc := range sigtest.Cases() {
		if tc.Keys != "" || strings.Contains(tc.Name, "pgp-") {
			continue
		}
		t.Run(tc.Name, func(t *testing.T) {
			verb := "verify-commit"
			if _, ok := sigtest.Object(t, tc.Name).(*object.Tag); ok {
				verb = "verify-tag"
			}
			cmd := exec.Command("git", "-c", "gpg.ssh.allowedSignersFile="+allowed, verb, hashes[tc.Name].String())
			cmd.Dir, cmd.Env = dir, env
			out, gitErr := cmd.CombinedOutput()
			if (gitErr == nil) != (tc.Err == nil) {
				t.Errorf("git %s %s: %v (%s); want refused: %v", verb, tc.Name, gitErr, bytes.TrimSpace(out), tc.Err)
			}
		})
	}
}

// TestParseKeysErrors: a keys file that holds no key, or anything that is
// neither an armored public key nor an allowed signer, is refused, naming
// the block or line.
func TestParseKeysErrors(t *testing.T) {
	good := string(sigtest.Read(t, "keys", "pgp-trusted.asc"))
	line := strings.TrimSpace(string(sigtest.Read(t, "keys", "ssh-trusted.pub")))
	tests := []struct {
		name, content, want string
	}{
		{"empty", "", "no key found: neither an armored OpenPGP public key"},
		{"comments only", "# keys\n\n", "no key found: neither an armored OpenPGP public key"},
		{"public key line without principals", "ssh-ed25519 AAAA... me@host\n", "SSH allowed signers: line 1: the line starts with the key type ssh-ed25519"},
		{"text around a key", "Alice's key:\n" + good, `SSH allowed signers: line 1: "key:" is neither a supported key type nor an option`},
		{"truncated", good[:len(good)/2], `armored block 1 (line 1) has no "-----END PGP ...-----" line`},
		{"garbage body", "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nAAAA\n=AAAA\n-----END PGP PUBLIC KEY BLOCK-----\n", "armored block 1 (line 1)"},
		{"private key", good + privateBlock(t, good), `armored block 2 (line ` + fmt.Sprint(strings.Count(good, "\n")+1) + `) is a "PGP PRIVATE KEY BLOCK"`},
		{"bad line", "# keys\nalice " + line + "\nbob ssh-ed25519 !!!\n", "SSH allowed signers: line 3: ssh-ed25519 key is not valid base64"},
		{"bad line after an armored block", good + "bob\n", fmt.Sprintf("SSH allowed signers: line %d: no key after the principals", strings.Count(good, "\n")+1)},
		{"cert-authority", "*@example.com cert-authority " + line, "SSH allowed signers: line 1: option cert-authority is not supported"},
		{"unquoted option", "alice namespaces=git " + line, "SSH allowed signers: line 1: option namespaces: the value must be in double quotes"},
		{"bad time", `alice valid-before="2024" ` + line, `SSH allowed signers: line 1: option valid-before: "2024" is not a time`},
		{"too many keys", strings.Repeat("alice "+line+"\n", sshsig.MaxAllowedSigners+1), "more than 4096 allowed signers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keys, err := signature.ParseKeys([]byte(tt.content))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ParseKeys() = %v, %v; want an error containing %q", keys, err, tt.want)
			}
		})
	}
}

// privateBlock is an armored block of type "PGP PRIVATE KEY BLOCK": the
// packets of the armored public key pub under a private key's header,
// which is all ParseKeys reads of a block it refuses.
func privateBlock(t *testing.T, pub string) string {
	t.Helper()
	block, err := armor.Decode(strings.NewReader(pub))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	w, err := armor.Encode(&b, openpgp.PrivateKeyType, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(w, block.Body); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String() + "\n"
}

// TestErrorMessages pins the messages users see.
func TestErrorMessages(t *testing.T) {
	sha := "1a2b3c4d5e6f7a8b9c0d1a2b3c4d5e6f7a8b9c0d"
	tests := []struct {
		err  signature.Error
		want string
	}{
		{signature.Error{Commit: sha, Signer: "Eve <eve@example.com>", Err: signature.ErrUnsigned},
			`commit 1a2b3c4d5e6f by "Eve <eve@example.com>" is unsigned; --verify-commits accepts only signatures by keys in --trusted-keys-file`},
		{signature.Error{Commit: sha, KeyID: "0123456789ABCDEF", Signer: "Eve <eve@example.com>", Err: pgperrors.ErrUnknownIssuer},
			`commit 1a2b3c4d5e6f by "Eve <eve@example.com>" is signed by key 0123456789ABCDEF which is not in --trusted-keys-file`},
		{signature.Error{Commit: sha, Tag: "v1", KeyID: "0123456789ABCDEF", Signer: "Eve\n <e>", Err: pgperrors.ErrUnknownIssuer},
			`tag "v1" (commit 1a2b3c4d5e6f) by "Eve\n <e>" is signed by key 0123456789ABCDEF which is not in --trusted-keys-file`},
		{signature.Error{Commit: sha, Signer: "A <a>", Err: errors.New("bad")},
			`commit 1a2b3c4d5e6f by "A <a>": signature by key (unknown) does not verify: bad`},
		{signature.Error{Commit: sha, KeyID: "SHA256:abc", Signer: "Eve <eve@example.com>", Err: sshsig.ErrUnknownKey},
			`commit 1a2b3c4d5e6f by "Eve <eve@example.com>" is signed by key SHA256:abc which is not in --trusted-keys-file`},
		{signature.Error{Commit: sha, Tag: "v1", KeyID: "SHA256:abc", Signer: "A <a>", Err: &sshsig.NotAllowedError{Reasons: []string{"line 2 says no", "line 3 too"}}},
			`tag "v1" (commit 1a2b3c4d5e6f) by "A <a>" is signed by key SHA256:abc, but --trusted-keys-file does not allow that key here: line 2 says no; line 3 too`},
		{signature.Error{Commit: sha, KeyID: "SHA256:abc", Signer: "A <a>", Err: fmt.Errorf("%w: it does not match the signed message", sshsig.ErrBadSignature)},
			`commit 1a2b3c4d5e6f by "A <a>": signature by key SHA256:abc does not verify: bad signature: it does not match the signed message`},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() =\n%s\nwant\n%s", got, tt.want)
		}
	}
}
