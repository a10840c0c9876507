package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	pgperrors "github.com/ProtonMail/go-crypto/openpgp/errors"
	"github.com/go-git/go-git/v5/plumbing"
	"golang.org/x/crypto/ssh"

	"recond.dev/recond/reconcile/source/sshsig"
)

// signingKey is an SSH key pair made by ssh-keygen.
type signingKey struct {
	priv string // the private key's file
	line string // the public key as keytype base64key
	fp   string // its SHA256 fingerprint, as a SignatureError names it
}

// newSigningKey makes an Ed25519 key pair with ssh-keygen in dir.
func newSigningKey(t *testing.T, dir, name string) signingKey {
	t.Helper()
	priv := filepath.Join(dir, name)
	runCmd(t, dir, nil, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name+"@example.com", "-f", priv)
	b, err := os.ReadFile(priv + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey(b)
	if err != nil {
		t.Fatal(err)
	}
	return signingKey{priv: priv, line: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub))), fp: ssh.FingerprintSHA256(pub)}
}

// gitCLI runs the git binary in a repository, isolated from the user's
// and the system's configuration. Commits and tags are signed with SSH
// keys as `git -c gpg.format=ssh -c user.signingkey=KEY commit -S` does
// (git runs `ssh-keygen -Y sign -n git`).
type gitCLI struct {
	t   *testing.T
	dir string
	env []string
}

func newGitCLI(t *testing.T, dir string) *gitCLI {
	t.Helper()
	for _, bin := range []string{"git", "ssh-keygen"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("no %s", bin)
		}
	}
	env := append(os.Environ(), "HOME="+t.TempDir(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=Test", "GIT_AUTHOR_EMAIL=test@example.com", "GIT_COMMITTER_NAME=Test", "GIT_COMMITTER_EMAIL=test@example.com")
	return &gitCLI{t: t, dir: dir, env: env}
}

// git runs git with args at time when (the author, committer and tagger
// date) and returns its trimmed output.
func (g *gitCLI) git(when time.Time, stdin []byte, args ...string) string {
	g.t.Helper()
	date := fmt.Sprintf("@%d +0000", when.Unix())
	cmd := exec.Command("git", args...)
	cmd.Dir = g.dir
	cmd.Env = append(g.env, "GIT_AUTHOR_DATE="+date, "GIT_COMMITTER_DATE="+date)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		g.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// commit writes cm.yaml and commits it at time when, signed with key
// (unsigned when nil), and returns the commit's SHA.
func (g *gitCLI) commit(key *signingKey, when time.Time, name string) string {
	g.t.Helper()
	writeFile(g.t, filepath.Join(g.dir, "cm.yaml"), cm(name))
	g.git(when, nil, "add", "-A")
	args := []string{"commit", "-q", "--allow-empty", "-m", name}
	if key != nil {
		args = append([]string{"-c", "gpg.format=ssh", "-c", "user.signingkey=" + key.priv}, append(args, "-S")...)
	}
	g.git(when, nil, args...)
	return g.git(when, nil, "rev-parse", "HEAD")
}

// tag creates the annotated tag name on sha at time when, signed with key
// (unsigned when nil).
func (g *gitCLI) tag(name, sha string, key *signingKey, when time.Time) {
	g.t.Helper()
	args := []string{"tag", "-a", "-m", "release " + name, name, sha}
	if key != nil {
		args = []string{"-c", "gpg.format=ssh", "-c", "user.signingkey=" + key.priv, "tag", "-s", "-m", "release " + name, name, sha}
	}
	g.git(when, nil, args...)
}

// withSignature stores a copy of the unsigned commit sha carrying armored
// as its signature header, as git writes one, and returns the copy's SHA.
func (g *gitCLI) withSignature(sha, armored string) string {
	g.t.Helper()
	raw := g.git(time.Time{}, nil, "cat-file", "commit", sha) + "\n"
	head, msg, ok := strings.Cut(raw, "\n\n")
	if !ok || strings.Contains(head, "\ngpgsig ") {
		g.t.Fatalf("commit %s is not an unsigned commit:\n%s", sha, raw)
	}
	header := "gpgsig " + strings.ReplaceAll(strings.TrimSuffix(armored, "\n"), "\n", "\n ")
	signed := head + "\n" + header + "\n\n" + msg
	return g.git(time.Time{}, []byte(signed), "hash-object", "-t", "commit", "-w", "--stdin")
}

// signAs signs the unsigned commit sha with `ssh-keygen -Y sign -n
// namespace` and stores the signed copy, returning its SHA.
func (g *gitCLI) signAs(sha string, key signingKey, namespace string) string {
	g.t.Helper()
	payload := g.git(time.Time{}, nil, "cat-file", "commit", sha) + "\n"
	file := filepath.Join(g.t.TempDir(), "payload")
	writeFile(g.t, file, payload)
	runCmd(g.t, g.dir, nil, "ssh-keygen", "-q", "-Y", "sign", "-n", namespace, "-f", key.priv, file)
	sig, err := os.ReadFile(file + ".sig")
	if err != nil {
		g.t.Fatal(err)
	}
	return g.withSignature(sha, string(sig))
}

func runCmd(t *testing.T, dir string, stdin []byte, name string, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("no %s", name)
	}
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// sshSignedFixture is a repository with commits and tags signed with SSH keys by
// real git and ssh-keygen, and an OpenPGP-signed commit, one ref each, and
// a keys file that holds both kinds of key.
type sshSignedFixture struct {
	trusted, stranger, expiring, filesOnly signingKey
	pgp                                    *openpgp.Entity
	// allowedSigners are the SSH keys; keysText adds the OpenPGP key.
	allowedSigners, keysText string

	good, unknown, unsigned, forged, namespaceFile string
	expired, inWindow, wrongNamespaces, pgpGood    string
}

var (
	nov14 = time.Unix(1_700_000_000, 0)                   // 2023-11-14T22:13:20Z
	oct1  = time.Date(2023, 10, 1, 12, 0, 0, 0, time.UTC) // inside the expiring key's window
)

func newSSHSignedFixture(t *testing.T, r *testRepo) sshSignedFixture {
	t.Helper()
	g := newGitCLI(t, r.dir)
	tmp := t.TempDir()
	f := sshSignedFixture{
		trusted:   newSigningKey(t, tmp, "trusted"),
		stranger:  newSigningKey(t, tmp, "stranger"),
		expiring:  newSigningKey(t, tmp, "expiring"),
		filesOnly: newSigningKey(t, tmp, "files"),
		pgp:       newKey(t, "Trusted"),
	}
	f.allowedSigners = strings.Join([]string{
		"# SSH keys trusted to sign commits",
		"trusted@example.com " + f.trusted.line,
		`expiring@example.com valid-before="20231101Z" ` + f.expiring.line,
		`files@example.com namespaces="file" ` + f.filesOnly.line,
	}, "\n") + "\n"
	f.keysText = f.allowedSigners + "\n" + armoredPublic(t, f.pgp)

	f.pgpGood = r.signedCommit(f.pgp, map[string]string{"cm.yaml": cm("pgp")})
	f.good = g.commit(&f.trusted, nov14, "good")
	f.unknown = g.commit(&f.stranger, nov14, "unknown")
	f.unsigned = g.commit(nil, nov14, "unsigned")
	f.expired = g.commit(&f.expiring, nov14, "expired")
	f.inWindow = g.commit(&f.expiring, oct1, "in-window")
	f.wrongNamespaces = g.commit(&f.filesOnly, nov14, "files")
	// The good commit's signature, on another commit.
	good, err := r.repo.CommitObject(plumbing.NewHash(f.good))
	if err != nil {
		t.Fatal(err)
	}
	f.forged = g.withSignature(f.unsigned, good.PGPSignature)
	// A trusted key's signature, made for another use than git's.
	f.namespaceFile = g.signAs(f.unsigned, f.trusted, "file")

	for name, sha := range map[string]string{
		"good": f.good, "unknown": f.unknown, "unsigned": f.unsigned, "forged": f.forged, "namespace-file": f.namespaceFile,
		"expired": f.expired, "in-window": f.inWindow, "wrong-namespaces": f.wrongNamespaces, "pgp-good": f.pgpGood,
	} {
		r.branch(name, sha)
	}
	r.branch("master", f.good)
	// A tag's own signature counts, not its commit's; its date is the
	// tagger's.
	g.tag("v-good", f.unsigned, &f.trusted, nov14)
	g.tag("v-unknown", f.good, &f.stranger, nov14)
	g.tag("v-expired", f.inWindow, &f.expiring, nov14)
	g.tag("v-in-window", f.expired, &f.expiring, oct1)
	g.tag("v-unsigned", f.good, nil, nov14)
	return f
}

func (f sshSignedFixture) cases() []verifyCase {
	short := func(sha string) string { return sha[:12] }
	return []verifyCase{
		{ref: "good", sha: f.good},
		{ref: "", sha: f.good},
		{ref: f.good, sha: f.good},
		{ref: "pgp-good", sha: f.pgpGood},
		{ref: "in-window", sha: f.inWindow},
		{ref: "unknown", sha: f.unknown, refused: true, err: sshsig.ErrUnknownKey, key: f.stranger.fp,
			wantInMsg: []string{"commit " + short(f.unknown), `"Test <test@example.com>"`, "signed by key " + f.stranger.fp + " which is not in --trusted-keys-file"}},
		{ref: "unsigned", sha: f.unsigned, refused: true, err: ErrUnsigned, wantInMsg: []string{"commit " + short(f.unsigned), "is unsigned"}},
		{ref: "forged", sha: f.forged, refused: true, err: sshsig.ErrBadSignature, key: f.trusted.fp,
			wantInMsg: []string{"commit " + short(f.forged), "signature by key " + f.trusted.fp + " does not verify: bad signature: it does not match the signed message"}},
		{ref: "namespace-file", sha: f.namespaceFile, refused: true, err: sshsig.ErrBadSignature, key: f.trusted.fp,
			wantInMsg: []string{"commit " + short(f.namespaceFile), `signature by key ` + f.trusted.fp + ` does not verify: bad signature: it is made for namespace "file", not "git"`}},
		{ref: "expired", sha: f.expired, refused: true, err: sshsig.ErrNotAllowed, key: f.expiring.fp,
			wantInMsg: []string{"commit " + short(f.expired), "signed by key " + f.expiring.fp + ", but --trusted-keys-file does not allow that key here: " +
				"line 3 allows the key only until 2023-11-01T00:00:00Z (valid-before), not at 2023-11-14T22:13:20Z"}},
		{ref: "wrong-namespaces", sha: f.wrongNamespaces, refused: true, err: sshsig.ErrNotAllowed, key: f.filesOnly.fp,
			wantInMsg: []string{`line 4 allows the key only for namespaces "file", not "git"`}},
		{ref: "v-good", sha: f.unsigned},
		{ref: "refs/tags/v-in-window", sha: f.expired},
		{ref: "v-unknown", sha: f.good, refused: true, err: sshsig.ErrUnknownKey, tag: "v-unknown", key: f.stranger.fp,
			wantInMsg: []string{`tag "v-unknown" (commit ` + short(f.good) + ")", "signed by key " + f.stranger.fp + " which is not in --trusted-keys-file"}},
		{ref: "v-expired", sha: f.inWindow, refused: true, err: sshsig.ErrNotAllowed, tag: "v-expired", key: f.expiring.fp,
			wantInMsg: []string{`tag "v-expired" (commit ` + short(f.inWindow) + ")", "(valid-before), not at 2023-11-14T22:13:20Z"}},
		{ref: "v-unsigned", sha: f.good, refused: true, err: ErrUnsigned, tag: "v-unsigned", wantInMsg: []string{`tag "v-unsigned"`, "is unsigned"}},
	}
}

func TestVerifySSHLocal(t *testing.T) {
	dir := t.TempDir()
	f := newSSHSignedFixture(t, newTestRepo(t, dir))
	keys := writeFile(t, filepath.Join(t.TempDir(), "trusted"), f.keysText)
	for _, tc := range f.cases() {
		t.Run(tc.name(), func(t *testing.T) {
			s := mustNew(t, Config{URL: "file://" + dir, Ref: tc.ref, VerifyCommits: true, TrustedKeysFile: keys})
			tc.check(t, s)
			tc.check(t, s) // and again: nothing is remembered
		})
	}
}

func TestVerifySSHHTTP(t *testing.T) {
	rf := newRemoteFixture(t, nil)
	f := newSSHSignedFixture(t, rf.repo)
	keys := writeFile(t, filepath.Join(t.TempDir(), "trusted"), f.keysText)
	cache := t.TempDir()
	for _, tc := range f.cases() {
		t.Run(tc.name(), func(t *testing.T) {
			s := mustNew(t, Config{URL: rf.url, Ref: tc.ref, CacheDir: cache, VerifyCommits: true, TrustedKeysFile: keys})
			tc.check(t, s)
			if rev := tc.check(t, s); rev.Fetched {
				t.Errorf("second Fetch() = %+v, want the commit found in the cache", rev)
			}
		})
	}
}

// git itself (verify-commit, verify-tag, with the same allowed signers)
// accepts what Fetch accepts and refuses what it refuses.
func TestVerifySSHAgreesWithGit(t *testing.T) {
	dir := t.TempDir()
	f := newSSHSignedFixture(t, newTestRepo(t, dir))
	g := newGitCLI(t, dir)
	allowed := writeFile(t, filepath.Join(t.TempDir(), "allowed_signers"), f.allowedSigners)
	keys := writeFile(t, filepath.Join(t.TempDir(), "trusted"), f.keysText)
	for _, tc := range f.cases() {
		if tc.ref == "pgp-good" {
			continue // git would need gpg
		}
		t.Run(tc.name(), func(t *testing.T) {
			s := mustNew(t, Config{URL: dir, Ref: tc.ref, VerifyCommits: true, TrustedKeysFile: keys})
			_, err := s.Fetch(context.Background())
			verb, obj := "verify-commit", tc.sha
			if tc.ref == "" {
				obj = "HEAD"
			} else if g.git(time.Time{}, nil, "cat-file", "-t", tc.ref) == "tag" {
				verb, obj = "verify-tag", tc.ref
			}
			cmd := exec.Command("git", "-c", "gpg.ssh.allowedSignersFile="+allowed, verb, obj)
			cmd.Dir, cmd.Env = dir, g.env
			out, gitErr := cmd.CombinedOutput()
			if (gitErr == nil) != (err == nil) {
				t.Errorf("git %s %s: %v (%s); Fetch: %v", verb, obj, gitErr, bytes.TrimSpace(out), err)
			}
		})
	}
}

// The keys file is read at every fetch: an SSH key is trusted from the
// fetch after its line is added until the fetch after it is removed, and
// only OpenPGP keys are no SSH keys.
func TestVerifySSHKeysFileIsReadAtEveryFetch(t *testing.T) {
	dir := t.TempDir()
	newTestRepo(t, dir)
	g := newGitCLI(t, dir)
	tmp := t.TempDir()
	alice, bob := newSigningKey(t, tmp, "alice"), newSigningKey(t, tmp, "bob")
	byBob := g.commit(&bob, nov14, "bob")
	pgp := armoredPublic(t, newKey(t, "Carol"))
	keys := filepath.Join(tmp, "trusted")
	s := mustNew(t, Config{URL: dir, VerifyCommits: true, TrustedKeysFile: keys})
	steps := []struct {
		name, keys string
		trust      bool
	}{
		{"only alice", "alice " + alice.line, false},
		{"bob added", "alice " + alice.line + "\nbob " + bob.line, true},
		{"bob removed", "alice " + alice.line, false},
		{"only an OpenPGP key", pgp, false},
		{"bob and an OpenPGP key", pgp + "bob " + bob.line + "\n", true},
	}
	for _, st := range steps {
		writeFile(t, keys, st.keys)
		rev, err := s.Fetch(context.Background())
		switch {
		case st.trust && (err != nil || rev.SHA != byBob):
			t.Errorf("%s: Fetch() = %+v, %v; want %s accepted", st.name, rev, err, byBob)
		case !st.trust && !errors.Is(err, sshsig.ErrUnknownKey):
			t.Errorf("%s: Fetch() = %+v, %v; want the unknown key %s refused", st.name, rev, err, bob.fp)
		}
	}
}

// A file with only SSH keys trusts no OpenPGP key: an OpenPGP-signed commit
// is refused as signed by a key not in the file.
func TestVerifyOpenPGPWithOnlySSHKeys(t *testing.T) {
	dir := t.TempDir()
	r := newTestRepo(t, dir)
	key := newKey(t, "Trusted")
	r.signedCommit(key, map[string]string{"cm.yaml": cm("a")})
	ssh := newSigningKey(t, t.TempDir(), "alice")
	keys := writeFile(t, filepath.Join(t.TempDir(), "trusted"), "alice "+ssh.line+"\n")
	_, err := mustNew(t, Config{URL: dir, VerifyCommits: true, TrustedKeysFile: keys}).Fetch(context.Background())
	var se *SignatureError
	if !errors.As(err, &se) || !errors.Is(err, pgperrors.ErrUnknownIssuer) || se.KeyID != keyID(key) {
		t.Fatalf("Fetch() = %v, want the OpenPGP key %s refused as unknown", err, keyID(key))
	}
	if want := "signed by key " + keyID(key) + " which is not in --trusted-keys-file"; !strings.Contains(err.Error(), want) {
		t.Errorf("Fetch() = %q, want it to contain %q", err, want)
	}
}

func TestVerifySSHKeysFileErrors(t *testing.T) {
	dir := t.TempDir()
	g := newGitCLI(t, dir)
	newTestRepo(t, dir)
	key := newSigningKey(t, t.TempDir(), "alice")
	g.commit(&key, nov14, "a")
	pgp := armoredPublic(t, newKey(t, "Carol"))
	pgpLines := strings.Count(pgp, "\n")
	tmp := t.TempDir()
	tests := []struct {
		name, content, want string
	}{
		{"bad line", "# keys\nalice " + key.line + "\nbob ssh-ed25519 !!!\n", "SSH allowed signers: line 3: ssh-ed25519 key is not valid base64"},
		{"bad line after an armored block", pgp + "bob\n", fmt.Sprintf("SSH allowed signers: line %d: no key after the principals", pgpLines+1)},
		{"cert-authority", "*@example.com cert-authority " + key.line, "SSH allowed signers: line 1: option cert-authority is not supported"},
		{"unquoted option", "alice namespaces=git " + key.line, "SSH allowed signers: line 1: option namespaces: the value must be in double quotes"},
		{"bad time", `alice valid-before="2024" ` + key.line, `SSH allowed signers: line 1: option valid-before: "2024" is not a time`},
		{"too many keys", strings.Repeat("alice "+key.line+"\n", sshsig.MaxAllowedSigners+1), "more than 4096 allowed signers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := writeFile(t, filepath.Join(tmp, strings.ReplaceAll(tt.name, " ", "-")), tt.content)
			_, err := mustNew(t, Config{URL: dir, VerifyCommits: true, TrustedKeysFile: file}).Fetch(context.Background())
			if err == nil || !strings.Contains(err.Error(), "--trusted-keys-file "+file+": ") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Fetch() error = %v, want one naming the file and containing %q", err, tt.want)
			}
			var se *SignatureError
			if errors.As(err, &se) {
				t.Errorf("a keys file problem is reported as a signature problem: %v", err)
			}
		})
	}
}
