package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	pgperrors "github.com/ProtonMail/go-crypto/openpgp/errors"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"recond.dev/recond/reconcile/source/sshsig"
)

// newKey makes an OpenPGP key pair (Ed25519, which is quick to generate).
func newKey(t *testing.T, name string) *openpgp.Entity {
	t.Helper()
	e, err := openpgp.NewEntity(name, "", strings.ToLower(name)+"@example.com", &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// keyID is how a SignatureError names e.
func keyID(e *openpgp.Entity) string { return fmt.Sprintf("%016X", e.PrimaryKey.KeyId) }

// armoredPublic is e's public key as an armored block.
func armoredPublic(t *testing.T, e *openpgp.Entity) string {
	t.Helper()
	var b bytes.Buffer
	w, err := armor.Encode(&b, openpgp.PublicKeyType, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Serialize(w); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String() + "\n"
}

// writeKeys writes the public keys, one armored block each, to file.
func writeKeys(t *testing.T, file string, keys ...*openpgp.Entity) string {
	t.Helper()
	var s string
	for _, k := range keys {
		s += armoredPublic(t, k)
	}
	return writeFile(t, file, s)
}

// signedTag creates an annotated tag signed with key (unsigned when nil).
func (r *testRepo) signedTag(name, sha string, key *openpgp.Entity) {
	r.t.Helper()
	opts := &git.CreateTagOptions{Tagger: r.sig(), Message: "release " + name, SignKey: key}
	if _, err := r.repo.CreateTag(name, plumbing.NewHash(sha), opts); err != nil {
		r.t.Fatal(err)
	}
}

// forge stores a copy of commit sha with another message but the same
// signature, and returns the copy's SHA.
func (r *testRepo) forge(sha string) string {
	r.t.Helper()
	c, err := r.repo.CommitObject(plumbing.NewHash(sha))
	if err != nil {
		r.t.Fatal(err)
	}
	forged := *c
	forged.Message = "not what was signed"
	obj := r.repo.Storer.NewEncodedObject()
	if err := forged.Encode(obj); err != nil {
		r.t.Fatal(err)
	}
	h, err := r.repo.Storer.SetEncodedObject(obj)
	if err != nil {
		r.t.Fatal(err)
	}
	return h.String()
}

// signedFixture is a repository with commits and tags signed by trusted,
// by stranger (whose key is not trusted) and not at all, one ref each.
type signedFixture struct {
	trusted, stranger *openpgp.Entity
	good, unknown     string // commits signed by trusted and stranger
	unsigned, forged  string
}

func newSignedFixture(t *testing.T, r *testRepo) signedFixture {
	t.Helper()
	f := signedFixture{trusted: newKey(t, "Trusted"), stranger: newKey(t, "Stranger")}
	f.good = r.signedCommit(f.trusted, map[string]string{"cm.yaml": cm("good")})
	f.unknown = r.signedCommit(f.stranger, map[string]string{"cm.yaml": cm("unknown")})
	f.unsigned = r.signedCommit(nil, map[string]string{"cm.yaml": cm("unsigned")})
	f.forged = r.forge(f.good)
	for name, sha := range map[string]string{"good": f.good, "unknown": f.unknown, "unsigned": f.unsigned, "forged": f.forged} {
		r.branch(name, sha)
	}
	r.branch("master", f.good)
	// A tag's own signature counts, not its commit's.
	r.signedTag("v-good", f.unsigned, f.trusted)
	r.signedTag("v-unsigned", f.good, nil)
	r.signedTag("v-unknown", f.good, f.stranger)
	r.tag("light-good", f.good, false)
	r.tag("light-unsigned", f.unsigned, false)
	return f
}

type verifyCase struct {
	ref       string
	sha       string   // the commit the ref resolves to
	refused   bool     // Fetch fails with a *SignatureError
	err       error    // the SignatureError's cause, when one is expected
	tag       string   // SignatureError.Tag
	key       string   // SignatureError.KeyID
	wantInMsg []string // substrings of the message
}

func (f signedFixture) cases() []verifyCase {
	short := func(sha string) string { return sha[:12] }
	return []verifyCase{
		{ref: "good", sha: f.good},
		{ref: "", sha: f.good},
		{ref: f.good, sha: f.good},
		{ref: "unknown", sha: f.unknown, refused: true, err: pgperrors.ErrUnknownIssuer, key: keyID(f.stranger),
			wantInMsg: []string{"commit " + short(f.unknown), "signed by key " + keyID(f.stranger) + " which is not in --trusted-keys-file", `"Test <test@example.com>"`}},
		{ref: "unsigned", sha: f.unsigned, refused: true, err: ErrUnsigned, wantInMsg: []string{"commit " + short(f.unsigned), "is unsigned"}},
		{ref: f.unsigned, sha: f.unsigned, refused: true, err: ErrUnsigned, wantInMsg: []string{"commit " + short(f.unsigned), "is unsigned"}},
		{ref: "forged", sha: f.forged, refused: true, key: keyID(f.trusted), wantInMsg: []string{"commit " + short(f.forged), "signature by key " + keyID(f.trusted) + " does not verify"}},
		{ref: "v-good", sha: f.unsigned},
		{ref: "refs/tags/v-good", sha: f.unsigned},
		{ref: "v-unsigned", sha: f.good, refused: true, err: ErrUnsigned, tag: "v-unsigned",
			wantInMsg: []string{`tag "v-unsigned" (commit ` + short(f.good) + ")", "is unsigned"}},
		{ref: "refs/tags/v-unknown", sha: f.good, refused: true, err: pgperrors.ErrUnknownIssuer, tag: "v-unknown", key: keyID(f.stranger),
			wantInMsg: []string{`tag "v-unknown" (commit ` + short(f.good) + ")", "signed by key " + keyID(f.stranger)}},
		{ref: "light-good", sha: f.good},
		{ref: "light-unsigned", sha: f.unsigned, refused: true, err: ErrUnsigned, wantInMsg: []string{"commit " + short(f.unsigned)}},
	}
}

func (tc verifyCase) name() string {
	switch {
	case tc.ref == "":
		return "HEAD"
	case isSHA(tc.ref):
		return "sha " + shortSHA(tc.ref)
	}
	return tc.ref
}

// check fetches with s and compares the outcome with tc.
func (tc verifyCase) check(t *testing.T, s *Source) Revision {
	t.Helper()
	rev, err := s.Fetch(context.Background())
	if !tc.refused {
		if err != nil {
			t.Fatalf("Fetch() = %v, want %s accepted", err, tc.sha)
		}
		if rev.SHA != tc.sha {
			t.Fatalf("Fetch() = %s, want %s", rev.SHA, tc.sha)
		}
		return rev
	}
	var se *SignatureError
	if !errors.As(err, &se) {
		t.Fatalf("Fetch() = %+v, %v; want a *SignatureError", rev, err)
	}
	if rev != (Revision{}) {
		t.Errorf("Fetch() returned %+v with its error, want no revision", rev)
	}
	got := SignatureError{Commit: se.Commit, Tag: se.Tag, KeyID: se.KeyID}
	want := SignatureError{Commit: tc.sha, Tag: tc.tag, KeyID: tc.key}
	if got != want {
		t.Errorf("SignatureError = %+v, want %+v", got, want)
	}
	if tc.err != nil && !errors.Is(err, tc.err) {
		t.Errorf("Fetch() error = %v, want one matching %v", err, tc.err)
	}
	for _, s := range tc.wantInMsg {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not contain %q", err, s)
		}
	}
	return rev
}

func TestVerifyLocal(t *testing.T) {
	dir := t.TempDir()
	f := newSignedFixture(t, newTestRepo(t, dir))
	keys := writeKeys(t, filepath.Join(t.TempDir(), "keys.asc"), f.trusted)
	for _, tc := range f.cases() {
		t.Run(tc.name(), func(t *testing.T) {
			s := mustNew(t, Config{URL: "file://" + dir, Ref: tc.ref, VerifyCommits: true, TrustedKeysFile: keys})
			tc.check(t, s)
			tc.check(t, s) // and again: nothing is remembered
		})
	}
}

func TestVerifyHTTP(t *testing.T) {
	rf := newRemoteFixture(t, nil)
	f := newSignedFixture(t, rf.repo)
	keys := writeKeys(t, filepath.Join(t.TempDir(), "keys.asc"), f.trusted)
	cache := t.TempDir() // shared: later cases find their commit cached
	for _, tc := range f.cases() {
		t.Run(tc.name(), func(t *testing.T) {
			s := mustNew(t, Config{URL: rf.url, Ref: tc.ref, CacheDir: cache, VerifyCommits: true, TrustedKeysFile: keys})
			tc.check(t, s)
			// The second Fetch finds the commit in the cache and fetches
			// nothing; it must still refuse what the first refused.
			if rev := tc.check(t, s); rev.Fetched {
				t.Errorf("second Fetch() = %+v, want the commit found in the cache", rev)
			}
		})
	}
	// The refused commits are in the cache; an unverified Source would
	// accept them without fetching, a verifying one does not.
	for _, ref := range []string{"unknown", "unsigned"} {
		if rev := mustFetch(t, mustNew(t, Config{URL: rf.url, Ref: ref, CacheDir: cache})); rev.Fetched {
			t.Fatalf("Fetch(%s) without verification = %+v, want it cached", ref, rev)
		}
		s := mustNew(t, Config{URL: rf.url, Ref: ref, CacheDir: cache, VerifyCommits: true, TrustedKeysFile: keys})
		var se *SignatureError
		if _, err := s.Fetch(context.Background()); !errors.As(err, &se) {
			t.Errorf("Fetch(%s) of a cached commit = %v, want a *SignatureError", ref, err)
		}
	}
}

func TestVerifyOffAcceptsUnsigned(t *testing.T) {
	dir := t.TempDir()
	newSignedFixture(t, newTestRepo(t, dir))
	for _, ref := range []string{"unsigned", "unknown", "v-unsigned"} {
		if rev := mustFetch(t, mustNew(t, Config{URL: dir, Ref: ref})); rev.SHA == "" {
			t.Errorf("Fetch(%s) = %+v", ref, rev)
		}
	}
}

func TestVerifyKeysFileIsReadAtEveryFetch(t *testing.T) {
	dir := t.TempDir()
	r := newTestRepo(t, dir)
	alice, bob := newKey(t, "Alice"), newKey(t, "Bob")
	byBob := r.signedCommit(bob, map[string]string{"cm.yaml": cm("bob")})
	keys := writeKeys(t, filepath.Join(t.TempDir(), "keys.asc"), alice)
	s := mustNew(t, Config{URL: dir, VerifyCommits: true, TrustedKeysFile: keys})

	steps := []struct {
		name  string
		keys  []*openpgp.Entity // written before the Fetch
		trust bool
	}{
		{"only alice", []*openpgp.Entity{alice}, false},
		{"bob added after alice", []*openpgp.Entity{alice, bob}, true},
		{"bob revoked", []*openpgp.Entity{alice}, false},
		{"bob alone", []*openpgp.Entity{bob}, true},
	}
	for _, st := range steps {
		writeKeys(t, keys, st.keys...)
		rev, err := s.Fetch(context.Background())
		switch {
		case st.trust && (err != nil || rev.SHA != byBob):
			t.Errorf("%s: Fetch() = %+v, %v; want %s accepted", st.name, rev, err, byBob)
		case !st.trust && !errors.Is(err, pgperrors.ErrUnknownIssuer):
			t.Errorf("%s: Fetch() = %+v, %v; want the unknown key %s refused", st.name, rev, err, keyID(bob))
		}
	}
}

func TestVerifyKeysFileErrors(t *testing.T) {
	dir := t.TempDir()
	r := newTestRepo(t, dir)
	key := newKey(t, "Trusted")
	r.signedCommit(key, map[string]string{"cm.yaml": cm("a")})
	var private bytes.Buffer
	w, err := armor.Encode(&private, openpgp.PrivateKeyType, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := key.SerializePrivate(w, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	good := armoredPublic(t, key)
	tmp := t.TempDir()
	tests := []struct {
		name    string
		content *string // nil: the file does not exist
		want    string
		is      error
	}{
		{"missing", nil, "read --trusted-keys-file", os.ErrNotExist},
		{"empty", ptr(""), "no key found: neither an armored OpenPGP public key", nil},
		{"comments only", ptr("# keys\n\n"), "no key found: neither an armored OpenPGP public key", nil},
		{"public key line without principals", ptr("ssh-ed25519 AAAA... me@host\n"), "SSH allowed signers: line 1: the line starts with the key type ssh-ed25519", nil},
		{"text around a key", ptr("Alice's key:\n" + good), `SSH allowed signers: line 1: "key:" is neither a supported key type nor an option`, nil},
		{"truncated", ptr(good[:len(good)/2]), `armored block 1 (line 1) has no "-----END PGP ...-----" line`, nil},
		{"garbage body", ptr("-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nAAAA\n=AAAA\n-----END PGP PUBLIC KEY BLOCK-----\n"), "armored block 1 (line 1)", nil},
		{"private key", ptr(good + private.String()), `armored block 2 (line ` + fmt.Sprint(strings.Count(good, "\n")+1) + `) is a "PGP PRIVATE KEY BLOCK"`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(tmp, strings.ReplaceAll(tt.name, " ", "-")+".asc")
			if tt.content != nil {
				writeFile(t, file, *tt.content)
			}
			s := mustNew(t, Config{URL: dir, VerifyCommits: true, TrustedKeysFile: file})
			_, err := s.Fetch(context.Background())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Fetch() error = %v, want one containing %q", err, tt.want)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("Fetch() error = %v, want one matching %v", err, tt.is)
			}
			var se *SignatureError
			if errors.As(err, &se) {
				t.Errorf("a keys file problem is reported as a signature problem: %v", err)
			}
		})
	}
}

func ptr(s string) *string { return &s }

// TestSignatureErrorMessages pins the messages users see.
func TestSignatureErrorMessages(t *testing.T) {
	sha := "1a2b3c4d5e6f7a8b9c0d1a2b3c4d5e6f7a8b9c0d"
	tests := []struct {
		err  SignatureError
		want string
	}{
		{SignatureError{Commit: sha, Signer: "Eve <eve@example.com>", Err: ErrUnsigned},
			`commit 1a2b3c4d5e6f by "Eve <eve@example.com>" is unsigned; --verify-commits accepts only signatures by keys in --trusted-keys-file`},
		{SignatureError{Commit: sha, KeyID: "0123456789ABCDEF", Signer: "Eve <eve@example.com>", Err: pgperrors.ErrUnknownIssuer},
			`commit 1a2b3c4d5e6f by "Eve <eve@example.com>" is signed by key 0123456789ABCDEF which is not in --trusted-keys-file`},
		{SignatureError{Commit: sha, Tag: "v1", KeyID: "0123456789ABCDEF", Signer: "Eve\n <e>", Err: pgperrors.ErrUnknownIssuer},
			`tag "v1" (commit 1a2b3c4d5e6f) by "Eve\n <e>" is signed by key 0123456789ABCDEF which is not in --trusted-keys-file`},
		{SignatureError{Commit: sha, Signer: "A <a>", Err: errors.New("bad")},
			`commit 1a2b3c4d5e6f by "A <a>": signature by key (unknown) does not verify: bad`},
		{SignatureError{Commit: sha, KeyID: "SHA256:abc", Signer: "Eve <eve@example.com>", Err: sshsig.ErrUnknownKey},
			`commit 1a2b3c4d5e6f by "Eve <eve@example.com>" is signed by key SHA256:abc which is not in --trusted-keys-file`},
		{SignatureError{Commit: sha, Tag: "v1", KeyID: "SHA256:abc", Signer: "A <a>", Err: &sshsig.NotAllowedError{Reasons: []string{"line 2 says no", "line 3 too"}}},
			`tag "v1" (commit 1a2b3c4d5e6f) by "A <a>" is signed by key SHA256:abc, but --trusted-keys-file does not allow that key here: line 2 says no; line 3 too`},
		{SignatureError{Commit: sha, KeyID: "SHA256:abc", Signer: "A <a>", Err: fmt.Errorf("%w: it does not match the signed message", sshsig.ErrBadSignature)},
			`commit 1a2b3c4d5e6f by "A <a>": signature by key SHA256:abc does not verify: bad signature: it does not match the signed message`},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() =\n%s\nwant\n%s", got, tt.want)
		}
	}
}

// Signatures made by go-git name the key id the message reports.
func TestIssuer(t *testing.T) {
	dir := t.TempDir()
	r := newTestRepo(t, dir)
	key := newKey(t, "Trusted")
	sha := r.signedCommit(key, map[string]string{"cm.yaml": cm("a")})
	c, err := r.repo.CommitObject(plumbing.NewHash(sha))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := issuer(c.PGPSignature), keyID(key); got != want {
		t.Errorf("issuer() = %q, want %q", got, want)
	}
	for _, bad := range []string{"", "garbage", "-----BEGIN SSH SIGNATURE-----\nAAAA\n-----END SSH SIGNATURE-----\n"} {
		if got := issuer(bad); got != "" {
			t.Errorf("issuer(%q) = %q, want \"\"", bad, got)
		}
	}
}
