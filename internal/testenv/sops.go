package testenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
)

// SOPS is the real sops CLI ($SOPS_BIN, which the Makefile builds from
// tools/sops at the version recond reads) with keys made by age-keygen
// (Debian's age package, `make age`), run in an environment of its own: a
// HOME in a temporary directory, no SOPS_*, AWS, GCP, Azure or Vault
// variable from the test's environment, no .sops.yaml but the one a test
// writes.
type SOPS struct {
	t      testing.TB
	bin    string
	keygen string
	dir    string
}

// NewSOPS finds sops and age-keygen, and skips the test when either is
// missing (`make test` provides both).
func NewSOPS(t testing.TB) *SOPS {
	t.Helper()
	bin := os.Getenv("SOPS_BIN")
	if bin == "" {
		t.Skip("SOPS_BIN is not set: `make tools` builds sops from tools/sops, and `make test` sets SOPS_BIN")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("SOPS_BIN %s: %v: `make tools` builds it", bin, err)
	}
	keygen, err := exec.LookPath("age-keygen")
	if err != nil {
		t.Skip("age-keygen is not installed: `make age` installs Debian's age package")
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "home"), 0o700); err != nil {
		t.Fatal(err)
	}
	return &SOPS{t: t, bin: bin, keygen: keygen, dir: dir}
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
	return identity, recipient
}

// KeygenPQ makes a post-quantum (ML-KEM-768+X25519) age key: the identity
// (AGE-SECRET-KEY-PQ-1…) and its recipient (age1pq1…). Debian's
// age-keygen (1.1) has no -pq, so the key is generated with filippo.io/age
// (the library age-keygen -pq uses); sops still does the encrypting.
func (s *SOPS) KeygenPQ() (identity, recipient string) {
	s.t.Helper()
	id, err := age.GenerateHybridIdentity()
	if err != nil {
		s.t.Fatal(err)
	}
	return id.String(), id.Recipient().String()
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
	if config == "" {
		// A config with no creation rule: sops then looks for no other
		// .sops.yaml, and takes everything from the flags.
		config = s.write("none-*.yaml", []byte("stores: {}\n"))
	}
	work := s.place(name, plain)
	cmd := append([]string{"--config", config, "encrypt"}, flags...)
	return s.run(work, nil, nil, s.bin, append(cmd, filepath.FromSlash(name))...)
}

// Decrypt decrypts enc, the file name, with `sops decrypt` and the keys
// file keys (SOPS_AGE_KEY_FILE): what sops itself makes of it.
func (s *SOPS) Decrypt(name string, enc []byte, keys string) ([]byte, error) {
	s.t.Helper()
	work := s.place(name, enc)
	none := s.write("none-*.yaml", []byte("stores: {}\n"))
	return s.run(work, []string{"SOPS_AGE_KEY_FILE=" + keys}, nil, s.bin, "--config", none, "decrypt", filepath.FromSlash(name))
}
