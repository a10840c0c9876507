package testenv

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"

	"recond.dev/recond/internal/testenv/tools"
)

// SOPS is the sops CLI for tests: what sops made for a test (its keys,
// the files it encrypted, what it decrypted) is read from the test's
// fixture, testdata/sops/TEST/ of the calling package (calls.json and one
// file per call), written by the real sops at the version tools/sops pins
// when RECOND_UPDATE_FIXTURES=1 (`make fixtures`: $SOPS_BIN, and keys
// made by age-keygen, Debian's age package). A call is found again by what
// it read (file name, content, flags, rule, keys), so a test's inputs must
// be the same at every run (FixtureText, not a random value); a call the
// fixture does not hold fails the test. LiveSOPS runs the CLI itself.
//
// The real CLI runs in an environment of its own: a HOME in a temporary
// directory, no SOPS_*, AWS, GCP, Azure or Vault variable from the test's
// environment, no .sops.yaml but the one a test writes.
type SOPS struct {
	t      testing.TB
	bin    string // the real sops, when it runs
	keygen string
	dir    string
	// fixture is the test's directory of recorded calls; rec what it
	// holds, or what this run records (UpdateFixtures).
	fixture string
	rec     *sopsRecord
	keys    int // Keygen and KeygenPQ calls so far
}

// sopsRecord is a fixture's calls.json: the sops version that made it and
// every call.
type sopsRecord struct {
	SOPS  string     `json:"sops"`
	Calls []sopsCall `json:"calls"`
}

// sopsCall is one recorded call.
type sopsCall struct {
	// Op is keygen, keygen-pq, encrypt or decrypt.
	Op string `json:"op"`
	// File is the file name sops was given; Args its other flags, Config
	// the rule file's content (--config).
	File   string   `json:"file,omitempty"`
	Args   []string `json:"args,omitempty"`
	Config string   `json:"config,omitempty"`
	// Input is the digest of everything the call read (sopsInput).
	Input string `json:"input,omitempty"`
	// Output names the fixture's file holding what the call wrote
	// (for a key: the identity and the recipient, one a line).
	Output string `json:"output,omitempty"`
	// Error is sops's error, when it failed.
	Error string `json:"error,omitempty"`
	data  []byte // Output's content, while recording
}

// NewSOPS is the SOPS of a test: recorded calls, or with
// RECOND_UPDATE_FIXTURES=1 the real sops and age-keygen, recording.
func NewSOPS(t testing.TB) *SOPS {
	t.Helper()
	s := newSOPS(t)
	s.fixture = filepath.Join("testdata", "sops", strings.ReplaceAll(t.Name(), "/", "_"))
	if !tools.UpdateFixtures() {
		s.rec = &sopsRecord{}
		if _, err := os.Stat(filepath.Join(s.fixture, "calls.json")); err != nil {
			t.Fatalf("no sops fixture for %s (%v): testdata/sops/generate.sh %s writes it with the real sops", t.Name(), err, t.Name())
		}
		tools.ReadJSON(t, filepath.Join(s.fixture, "calls.json"), s.rec)
		if pinned := tools.PinnedVersion(t, "sops", "github.com/getsops/sops/v3"); s.rec.SOPS != pinned {
			t.Fatalf("%s was made by sops %s, tools/sops pins %s: make fixtures makes it again", s.fixture, s.rec.SOPS, pinned)
		}
		return s
	}
	s.live(tools.FixtureTool(t, tools.SOPS))
	s.rec = &sopsRecord{SOPS: tools.Version(t, s.bin, "github.com/getsops/sops/v3")}
	t.Cleanup(s.save)
	return s
}

// LiveSOPS runs the real sops (tools.SOPS, $SOPS_BIN) and age-keygen at every
// call, recording nothing: for a benchmark.
func LiveSOPS(t testing.TB) *SOPS {
	t.Helper()
	s := newSOPS(t)
	s.live(tools.Find(t, tools.SOPS))
	return s
}

func newSOPS(t testing.TB) *SOPS {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "home"), 0o700); err != nil {
		t.Fatal(err)
	}
	return &SOPS{t: t, dir: dir}
}

// live makes s run bin and age-keygen.
func (s *SOPS) live(bin string) {
	s.t.Helper()
	s.bin, s.keygen = bin, tools.Find(s.t, tools.AgeKeygen)
}

// save writes the calls recorded into the test's fixture, replacing it,
// unless the test failed.
func (s *SOPS) save() {
	if s.t.Failed() {
		s.t.Logf("%s not written: the test failed", s.fixture)
		return
	}
	if err := os.RemoveAll(s.fixture); err != nil {
		s.t.Fatal(err)
	}
	if err := os.MkdirAll(s.fixture, 0o755); err != nil {
		s.t.Fatal(err)
	}
	for _, c := range s.rec.Calls {
		if c.Output == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(s.fixture, c.Output), c.data, 0o644); err != nil {
			s.t.Fatal(err)
		}
	}
	tools.WriteJSON(s.t, filepath.Join(s.fixture, "calls.json"), s.rec)
}

// record adds a call made by the real tools, with its output (or error).
func (s *SOPS) record(c sopsCall, out []byte, err error) {
	if err != nil {
		c.Error = err.Error()
	} else {
		c.data = out
		name := c.File
		if name == "" {
			name = "key.txt"
		}
		c.Output = fmt.Sprintf("%03d-%s-%s", len(s.rec.Calls)+1, c.Op, strings.ReplaceAll(filepath.ToSlash(name), "/", "_"))
	}
	s.rec.Calls = append(s.rec.Calls, c)
}

// recorded returns the output of the recorded call that matches c (its op
// and input), or its error.
func (s *SOPS) recorded(c sopsCall) ([]byte, error) {
	s.t.Helper()
	for _, r := range s.rec.Calls {
		if r.Op != c.Op || r.Input != c.Input {
			continue
		}
		if r.Error != "" {
			return nil, fmt.Errorf("%s (recorded)", r.Error)
		}
		data, err := os.ReadFile(filepath.Join(s.fixture, r.Output))
		if err != nil {
			s.t.Fatal(err)
		}
		return data, nil
	}
	s.t.Fatalf("%s holds no sops %s of %s with these flags and this content (the test changed, or gives sops a value that differs at every run): make fixtures makes it again", s.fixture, c.Op, c.File)
	return nil, nil
}

// nextKey returns the recorded key of the n-th Keygen or KeygenPQ call.
func (s *SOPS) nextKey(op string) (identity, recipient string) {
	s.t.Helper()
	n := 0
	for _, r := range s.rec.Calls {
		if r.Op != "keygen" && r.Op != "keygen-pq" {
			continue
		}
		if n++; n <= s.keys {
			continue
		}
		if r.Op != op {
			break
		}
		s.keys++
		data, err := os.ReadFile(filepath.Join(s.fixture, r.Output))
		if err != nil {
			s.t.Fatal(err)
		}
		identity, recipient, _ = strings.Cut(strings.TrimSpace(string(data)), "\n")
		return identity, recipient
	}
	s.t.Fatalf("%s holds no %s call number %d: make fixtures makes it again", s.fixture, op, s.keys+1)
	return "", ""
}

// env is the whole environment the commands run with.
func (s *SOPS) env(extra ...string) []string {
	home := filepath.Join(s.dir, "home")
	return append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"TMPDIR=" + s.dir,
		"LANG=C",
		"SOPS_DISABLE_VERSION_CHECK=1",
	}, extra...)
}

// run runs bin in dir with the SOPS environment (plus extra) and stdin,
// returning its stdout and, on failure, an error holding its stderr.
func (s *SOPS) run(dir string, extra []string, stdin []byte, bin string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = s.env(extra...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s %s: %v: %s", filepath.Base(bin), strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.Bytes(), nil
}

// Keygen makes an X25519 age key with age-keygen: the identity
// (AGE-SECRET-KEY-1…) and its recipient (age1…).
func (s *SOPS) Keygen() (identity, recipient string) {
	s.t.Helper()
	if s.bin == "" {
		return s.nextKey("keygen")
	}
	out, err := s.run(s.dir, nil, nil, s.keygen)
	if err != nil {
		s.t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(out), "\n") {
		if r, ok := strings.CutPrefix(line, "# public key: "); ok {
			recipient = strings.TrimSpace(r)
		}
		if strings.HasPrefix(line, "AGE-SECRET-KEY-1") {
			identity = strings.TrimSpace(line)
		}
	}
	if identity == "" || recipient == "" {
		s.t.Fatalf("age-keygen wrote no key:\n%s", out)
	}
	if s.rec != nil {
		s.record(sopsCall{Op: "keygen"}, []byte(identity+"\n"+recipient+"\n"), nil)
	}
	return identity, recipient
}

// KeygenPQ makes a post-quantum (ML-KEM-768+X25519) age key: the identity
// (AGE-SECRET-KEY-PQ-1…) and its recipient (age1pq1…). Debian's
// age-keygen (1.1) has no -pq, so the key is generated with filippo.io/age
// (the library age-keygen -pq uses); sops still does the encrypting.
func (s *SOPS) KeygenPQ() (identity, recipient string) {
	s.t.Helper()
	if s.bin == "" {
		return s.nextKey("keygen-pq")
	}
	id, err := age.GenerateHybridIdentity()
	if err != nil {
		s.t.Fatal(err)
	}
	identity, recipient = id.String(), id.Recipient().String()
	if s.rec != nil {
		s.record(sopsCall{Op: "keygen-pq"}, []byte(identity+"\n"+recipient+"\n"), nil)
	}
	return identity, recipient
}

// KeysFile writes identities into a keys file as SOPS_AGE_KEY_FILE reads
// it (with a comment, as age-keygen writes one) and returns its path.
func (s *SOPS) KeysFile(identities ...string) string {
	s.t.Helper()
	var b strings.Builder
	b.WriteString("# age keys for a test\n")
	for _, id := range identities {
		b.WriteString(id + "\n")
	}
	return s.write("keys-*.txt", []byte(b.String()))
}

// write writes data into a new file of the SOPS directory.
func (s *SOPS) write(pattern string, data []byte) string {
	s.t.Helper()
	f, err := os.CreateTemp(s.dir, pattern)
	if err == nil {
		_, err = f.Write(data)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		s.t.Fatal(err)
	}
	return f.Name()
}

// place writes data as the file name of a new work directory, and returns
// the directory.
func (s *SOPS) place(name string, data []byte) string {
	s.t.Helper()
	work, err := os.MkdirTemp(s.dir, "work-")
	if err != nil {
		s.t.Fatal(err)
	}
	full := filepath.Join(work, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(full), 0o700); err != nil {
		s.t.Fatal(err)
	}
	if err := os.WriteFile(full, data, 0o600); err != nil {
		s.t.Fatal(err)
	}
	return work
}

// Rule writes a .sops.yaml whose one creation rule has the given fields
// (YAML, one per line, such as "mac_only_encrypted: true" or what
// KeyGroups returns) and returns the flags that make Encrypt use it: what
// sops's command line cannot say (key groups, mac_only_encrypted, the
// comment rules) is said there.
func (s *SOPS) Rule(fields ...string) []string {
	s.t.Helper()
	var b strings.Builder
	b.WriteString("creation_rules:\n  - path_regex: ''\n")
	for _, f := range fields {
		for line := range strings.SplitSeq(strings.TrimRight(f, "\n"), "\n") {
			b.WriteString("    " + line + "\n")
		}
	}
	return []string{"--config", s.write("sops-*.yaml", []byte(b.String()))}
}

// KeyGroups is a creation rule's key_groups, one group of age recipients
// each, and its shamir_threshold (0: none, sops's default of every group).
func KeyGroups(threshold int, groups ...[]string) string {
	var b strings.Builder
	if threshold != 0 {
		fmt.Fprintf(&b, "shamir_threshold: %d\n", threshold)
	}
	b.WriteString("key_groups:\n")
	for _, g := range groups {
		b.WriteString("  - age:\n")
		for _, r := range g {
			fmt.Fprintf(&b, "      - %s\n", r)
		}
	}
	return b.String()
}

// Encrypt encrypts plain as the file name (its extension decides the
// format, as for sops; a relative path, which a rule's path_regex sees)
// with `sops encrypt` and the given flags: the recipients (--age r1,r2),
// the rule (--encrypted-regex, --unencrypted-suffix…), or those of Rule.
// With neither --config nor any recipient, sops has nothing to encrypt
// for and the test fails.
func (s *SOPS) Encrypt(name string, plain []byte, args ...string) []byte {
	s.t.Helper()
	out, err := s.EncryptErr(name, plain, args...)
	if err != nil {
		s.t.Fatal(err)
	}
	return out
}

// EncryptErr is Encrypt returning sops's failure instead of failing the
// test.
func (s *SOPS) EncryptErr(name string, plain []byte, args ...string) ([]byte, error) {
	s.t.Helper()
	config := ""
	var flags []string
	for i := 0; i < len(args); i++ {
		if args[i] == "--config" && i+1 < len(args) {
			config = args[i+1]
			i++
			continue
		}
		flags = append(flags, args[i])
	}
	c := sopsCall{Op: "encrypt", File: name, Args: flags}
	if config != "" {
		b, err := os.ReadFile(config)
		if err != nil {
			s.t.Fatal(err)
		}
		c.Config = string(b)
	}
	c.Input = sopsInput(c, plain)
	if s.bin == "" {
		return s.recorded(c)
	}
	if config == "" {
		// A config with no creation rule: sops then looks for no other
		// .sops.yaml, and takes everything from the flags.
		config = s.write("none-*.yaml", []byte("stores: {}\n"))
	}
	work := s.place(name, plain)
	cmd := append([]string{"--config", config, "encrypt"}, flags...)
	out, err := s.run(work, nil, nil, s.bin, append(cmd, filepath.FromSlash(name))...)
	if s.rec != nil {
		s.record(c, out, err)
	}
	return out, err
}

// Decrypt decrypts enc, the file name, with `sops decrypt` and the keys
// file keys (SOPS_AGE_KEY_FILE): what sops itself makes of it.
func (s *SOPS) Decrypt(name string, enc []byte, keys string) ([]byte, error) {
	s.t.Helper()
	k, err := os.ReadFile(keys)
	if err != nil {
		s.t.Fatal(err)
	}
	c := sopsCall{Op: "decrypt", File: name}
	c.Input = sopsInput(c, enc, k)
	if s.bin == "" {
		return s.recorded(c)
	}
	work := s.place(name, enc)
	none := s.write("none-*.yaml", []byte("stores: {}\n"))
	out, err := s.run(work, []string{"SOPS_AGE_KEY_FILE=" + keys}, nil, s.bin, "--config", none, "decrypt", filepath.FromSlash(name))
	if s.rec != nil {
		s.record(c, out, err)
	}
	return out, err
}

// sopsInput is the digest of what a call reads: its op, file name, flags
// and rule, and data (the file's content, the keys).
func sopsInput(c sopsCall, data ...[]byte) string {
	h := sha256.New()
	for _, part := range append([]string{c.Op, c.File, c.Config}, c.Args...) {
		fmt.Fprintf(h, "%d:%s;", len(part), part)
	}
	for _, d := range data {
		fmt.Fprintf(h, "%d:", len(d))
		h.Write(d)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}
