package source

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	pgperrors "github.com/ProtonMail/go-crypto/openpgp/errors"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"recond.dev/recond/reconcile/source/git/signature/sigtest"
	"recond.dev/recond/reconcile/source/sshsig"
)

// newSignedRepo stores in r the signed commits and tags of package
// signature's fixtures (sigtest), a branch for each commit and a tag for
// each tag, named as the objects are; master is pgp-good, and light-good
// and light-unsigned are lightweight tags of pgp-good and unsigned. It
// returns the commit each name resolves to.
func newSignedRepo(t *testing.T, r *testRepo) map[string]string {
	t.Helper()
	sha := map[string]string{}
	for name, h := range sigtest.Store(t, r.repo.Storer) {
		ref := plumbing.NewBranchReferenceName(name)
		sha[name] = h.String()
		if tag, ok := sigtest.Object(t, name).(*object.Tag); ok {
			ref, sha[name] = plumbing.NewTagReferenceName(name), tag.Target.String()
		}
		if err := r.repo.Storer.SetReference(plumbing.NewHashReference(ref, h)); err != nil {
			t.Fatal(err)
		}
	}
	r.branch("master", sha["pgp-good"])
	r.tag("light-good", sha["pgp-good"], false)
	r.tag("light-unsigned", sha["unsigned"], false)
	return sha
}

type verifyCase struct {
	ref  string
	sha  string // the commit the ref resolves to
	keys string // the keys file, under sigtest's keys/
	err  error  // the SignatureError's cause; nil: accepted
	tag  string // SignatureError.Tag
	key  string // SignatureError.KeyID
}

// verifyCases are sigtest's cases, each fetched by its branch or tag, and
// the other ways a ref names an object: HEAD, a full SHA, refs/tags/, a
// lightweight tag (whose commit's signature counts).
func verifyCases(t *testing.T, sha map[string]string) []verifyCase {
	t.Helper()
	var cases []verifyCase
	for _, c := range sigtest.Cases() {
		tc := verifyCase{ref: c.Name, sha: sha[c.Name], keys: c.KeysFile(), err: c.Err}
		if _, ok := sigtest.Object(t, c.Name).(*object.Tag); ok && c.Err != nil {
			tc.tag = c.Name
		}
		if c.Key != "" && c.Err != nil {
			tc.key = sigtest.KeyID(t, c.Key)
		}
		cases = append(cases, tc)
	}
	return append(cases,
		verifyCase{ref: "", sha: sha["pgp-good"]},
		verifyCase{ref: sha["pgp-good"], sha: sha["pgp-good"]},
		verifyCase{ref: sha["ssh-good"], sha: sha["ssh-good"]},
		verifyCase{ref: sha["unsigned"], sha: sha["unsigned"], err: ErrUnsigned},
		verifyCase{ref: "refs/tags/v-pgp-good", sha: sha["v-pgp-good"]},
		verifyCase{ref: "refs/tags/v-ssh-in-window", sha: sha["v-ssh-in-window"]},
		verifyCase{ref: "refs/tags/v-pgp-unknown", sha: sha["v-pgp-unknown"], err: pgperrors.ErrUnknownIssuer, tag: "v-pgp-unknown",
			key: sigtest.KeyID(t, "pgp-stranger.asc")},
		verifyCase{ref: "light-good", sha: sha["pgp-good"]},
		verifyCase{ref: "light-unsigned", sha: sha["unsigned"], err: ErrUnsigned},
	)
}

func (tc verifyCase) name() string {
	name := tc.ref
	switch {
	case tc.ref == "":
		name = "HEAD"
	case isSHA(tc.ref):
		name = "sha " + tc.ref[:12]
	}
	if tc.keys != "" && tc.keys != "trusted" {
		name += " with " + tc.keys
	}
	return name
}

// config is a verifying Config that fetches tc.ref from url.
func (tc verifyCase) config(url string) Config {
	keys := tc.keys
	if keys == "" {
		keys = "trusted"
	}
	return Config{URL: url, Ref: tc.ref, VerifyCommits: true, TrustedKeysFile: sigtest.Path("keys", keys)}
}

// check fetches with s and compares the outcome with tc.
func (tc verifyCase) check(t *testing.T, s *Source) Revision {
	t.Helper()
	rev, err := s.Fetch(context.Background())
	if tc.err == nil {
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
	if !errors.Is(err, tc.err) {
		t.Errorf("Fetch() error = %v, want one matching %v", err, tc.err)
	}
	what := "commit " + tc.sha[:12]
	if tc.tag != "" {
		what = fmt.Sprintf("tag %q (commit %s)", tc.tag, tc.sha[:12])
	}
	if !strings.Contains(err.Error(), what+` by "Test <test@example.com>"`) {
		t.Errorf("error %q does not name %s", err, what)
	}
	return rev
}

func TestVerifyLocal(t *testing.T) {
	dir := t.TempDir()
	sha := newSignedRepo(t, newTestRepo(t, dir))
	for _, tc := range verifyCases(t, sha) {
		t.Run(tc.name(), func(t *testing.T) {
			s := mustNew(t, tc.config("file://"+dir))
			tc.check(t, s)
			tc.check(t, s) // and again: nothing is remembered
		})
	}
}

func TestVerifyHTTP(t *testing.T) {
	rf := newRemoteFixture(t, nil)
	sha := newSignedRepo(t, rf.repo)
	cache := t.TempDir() // shared: later cases find their commit cached
	for _, tc := range verifyCases(t, sha) {
		t.Run(tc.name(), func(t *testing.T) {
			cfg := tc.config(rf.url)
			cfg.CacheDir = cache
			s := mustNew(t, cfg)
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
	for _, ref := range []string{"pgp-unknown", "ssh-unknown", "unsigned"} {
		if rev := mustFetch(t, mustNew(t, Config{URL: rf.url, Ref: ref, CacheDir: cache})); rev.Fetched {
			t.Fatalf("Fetch(%s) without verification = %+v, want it cached", ref, rev)
		}
		s := mustNew(t, Config{URL: rf.url, Ref: ref, CacheDir: cache, VerifyCommits: true, TrustedKeysFile: sigtest.Path("keys", "trusted")})
		var se *SignatureError
		if _, err := s.Fetch(context.Background()); !errors.As(err, &se) {
			t.Errorf("Fetch(%s) of a cached commit = %v, want a *SignatureError", ref, err)
		}
	}
}

func TestVerifyOffAcceptsUnsigned(t *testing.T) {
	dir := t.TempDir()
	newSignedRepo(t, newTestRepo(t, dir))
	for _, ref := range []string{"unsigned", "pgp-unknown", "ssh-unknown", "v-unsigned"} {
		if rev := mustFetch(t, mustNew(t, Config{URL: dir, Ref: ref})); rev.SHA == "" {
			t.Errorf("Fetch(%s) = %+v", ref, rev)
		}
	}
}

// The keys file is read at every fetch: a key is trusted from the fetch
// after it is added until the fetch after it is removed; OpenPGP keys are
// no SSH keys.
func TestVerifyKeysFileIsReadAtEveryFetch(t *testing.T) {
	dir := t.TempDir()
	sha := newSignedRepo(t, newTestRepo(t, dir))
	keys := filepath.Join(t.TempDir(), "keys")
	pgpTrusted := string(sigtest.Read(t, "keys", "pgp-trusted.asc"))
	pgpStranger := string(sigtest.Read(t, "keys", "pgp-stranger.asc"))
	alice := sigtest.AllowedSigner(t, "alice", "ssh-trusted.pub")
	bob := sigtest.AllowedSigner(t, "bob", "ssh-stranger.pub")
	// pgp-unknown and ssh-unknown are signed by the strangers' keys.
	sources := map[string]*Source{}
	for _, ref := range []string{"pgp-unknown", "ssh-unknown"} {
		sources[ref] = mustNew(t, Config{URL: dir, Ref: ref, VerifyCommits: true, TrustedKeysFile: keys})
	}
	steps := []struct {
		name, ref, keys string // keys: written before the Fetch
		trust           bool
		unknown         error // the cause when it is not trusted
	}{
		{"only the trusted OpenPGP key", "pgp-unknown", pgpTrusted, false, pgperrors.ErrUnknownIssuer},
		{"the stranger's key added after it", "pgp-unknown", pgpTrusted + pgpStranger, true, nil},
		{"the stranger's key revoked", "pgp-unknown", pgpTrusted, false, pgperrors.ErrUnknownIssuer},
		{"the stranger's key alone", "pgp-unknown", pgpStranger, true, nil},
		{"only alice", "ssh-unknown", alice, false, sshsig.ErrUnknownKey},
		{"bob added", "ssh-unknown", alice + bob, true, nil},
		{"bob removed", "ssh-unknown", alice, false, sshsig.ErrUnknownKey},
		{"only an OpenPGP key", "ssh-unknown", pgpTrusted, false, sshsig.ErrUnknownKey},
		{"bob and an OpenPGP key", "ssh-unknown", pgpTrusted + bob, true, nil},
	}
	for _, st := range steps {
		writeFile(t, keys, st.keys)
		rev, err := sources[st.ref].Fetch(context.Background())
		switch {
		case st.trust && (err != nil || rev.SHA != sha[st.ref]):
			t.Errorf("%s: Fetch(%s) = %+v, %v; want %s accepted", st.name, st.ref, rev, err, sha[st.ref])
		case !st.trust && !errors.Is(err, st.unknown):
			t.Errorf("%s: Fetch(%s) = %+v, %v; want the unknown key refused", st.name, st.ref, rev, err)
		}
	}
}

// A keys file that cannot be read or parsed fails the fetch naming the
// file (signature.ParseKeys's own tests have every way a file is wrong),
// and is not a signature problem.
func TestVerifyKeysFileErrors(t *testing.T) {
	dir := t.TempDir()
	newSignedRepo(t, newTestRepo(t, dir))
	tmp := t.TempDir()
	tests := []struct {
		name    string
		content *string // nil: the file does not exist
		want    string
		is      error
	}{
		{"missing", nil, "read --trusted-keys-file", os.ErrNotExist},
		{"empty", ptr(""), "no key found: neither an armored OpenPGP public key", nil},
		{"bad line after an armored block", ptr(string(sigtest.Read(t, "keys", "pgp-trusted.asc")) + "bob\n"), "SSH allowed signers: line ", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(tmp, strings.ReplaceAll(tt.name, " ", "-"))
			want := tt.want
			if tt.content != nil {
				writeFile(t, file, *tt.content)
				want = "--trusted-keys-file " + file + ": " + tt.want
			}
			_, err := mustNew(t, Config{URL: dir, VerifyCommits: true, TrustedKeysFile: file}).Fetch(context.Background())
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("Fetch() error = %v, want one containing %q", err, want)
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
