package sshsig

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

func TestParseAllowedSigners(t *testing.T) {
	alice, bob := fixedSigner(t, 1).PublicKey(), fixedSigner(t, 2).PublicKey()
	a, b := authorized(alice), authorized(bob)
	day := func(y int, m time.Month, d int, loc *time.Location) time.Time {
		return time.Date(y, m, d, 0, 0, 0, 0, loc)
	}
	tests := []struct {
		name string
		text string
		want []Signer // Key, Line, Principals, Namespaces, ValidAfter, ValidBefore
	}{
		{"plain", "alice@example.com " + a + " alice's laptop\n",
			[]Signer{{Line: 1, Principals: "alice@example.com", Key: alice}}},
		{"comments and blank lines", "# trusted\n\n   # indented\n\t\nalice " + a + "\nbob " + b,
			[]Signer{{Line: 5, Principals: "alice", Key: alice}, {Line: 6, Principals: "bob", Key: bob}}},
		{"CRLF and tabs", "alice\t" + strings.Replace(a, " ", "\t", 1) + "\r\n",
			[]Signer{{Line: 1, Principals: "alice", Key: alice}}},
		{"several principals", "alice@example.com,*@corp.example " + a,
			[]Signer{{Line: 1, Principals: "alice@example.com,*@corp.example", Key: alice}}},
		{"quoted principals", `"Alice Example" ` + a,
			[]Signer{{Line: 1, Principals: "Alice Example", Key: alice}}},
		{"options", `alice namespaces="git,file",valid-after="20230101Z",valid-before="20240101123000Z" ` + a,
			[]Signer{{Line: 1, Principals: "alice", Key: alice, Namespaces: []string{"git", "file"},
				ValidAfter: day(2023, 1, 1, time.UTC), ValidBefore: time.Date(2024, 1, 1, 12, 30, 0, 0, time.UTC)}}},
		{"option names in any case, UTC suffix, minutes", `alice Valid-Before="202401011230UTC",NAMESPACES="git" ` + a,
			[]Signer{{Line: 1, Principals: "alice", Key: alice, Namespaces: []string{"git"}, ValidBefore: time.Date(2024, 1, 1, 12, 30, 0, 0, time.UTC)}}},
		{"local time without Z", `alice valid-after="20230101" ` + a,
			[]Signer{{Line: 1, Principals: "alice", Key: alice, ValidAfter: day(2023, 1, 1, time.Local)}}},
		{"quote escaped in a value", `alice namespaces="a\"b,git" ` + a,
			[]Signer{{Line: 1, Principals: "alice", Key: alice, Namespaces: []string{`a"b`, "git"}}}},
		{"empty namespaces", `alice namespaces="" ` + a,
			[]Signer{{Line: 1, Principals: "alice", Key: alice, Namespaces: []string{""}}}},
		{"one key on two lines", "alice " + a + "\nalice-again " + a,
			[]Signer{{Line: 1, Principals: "alice", Key: alice}, {Line: 2, Principals: "alice-again", Key: alice}}},
		{"empty", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mustAllowed(t, tt.text).Signers()
			if len(got) != len(tt.want) {
				t.Fatalf("got %d signers, want %d: %+v", len(got), len(tt.want), got)
			}
			for i, w := range tt.want {
				g := got[i]
				if g.Line != w.Line || g.Principals != w.Principals || !bytes.Equal(g.Key.Marshal(), w.Key.Marshal()) ||
					!slices.Equal(g.Namespaces, w.Namespaces) || (g.Namespaces == nil) != (w.Namespaces == nil) ||
					!g.ValidAfter.Equal(w.ValidAfter) || !g.ValidBefore.Equal(w.ValidBefore) {
					t.Errorf("signer %d = %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

func TestParseAllowedSignersLookup(t *testing.T) {
	alice, bob, carol := fixedSigner(t, 1).PublicKey(), fixedSigner(t, 2).PublicKey(), fixedSigner(t, 3).PublicKey()
	a := mustAllowed(t, "alice "+authorized(alice)+"\nbob "+authorized(bob)+"\nalice2 "+authorized(alice))
	if a.Len() != 3 {
		t.Errorf("Len() = %d, want 3", a.Len())
	}
	for _, tt := range []struct {
		key   ssh.PublicKey
		lines []int
	}{{alice, []int{1, 3}}, {bob, []int{2}}, {carol, nil}} {
		var got []int
		for _, s := range a.lookup(tt.key) {
			got = append(got, s.Line)
		}
		if !slices.Equal(got, tt.lines) {
			t.Errorf("lookup(%s) = lines %v, want %v", ssh.FingerprintSHA256(tt.key), got, tt.lines)
		}
	}
	var none *AllowedSigners
	if none.Len() != 0 || none.lookup(alice) != nil || none.Signers() != nil {
		t.Error("a nil *AllowedSigners lists keys")
	}
}

func TestParseAllowedSignersErrors(t *testing.T) {
	k := authorized(fixedSigner(t, 1).PublicKey())
	b64 := strings.Fields(k)[1]
	rsaLine := "alice ssh-rsa " + b64
	tests := []struct {
		name, text, want string
	}{
		{"principals only", "alice", "line 1: no key after the principals"},
		{"no principals", k + " alice@laptop", "line 1: the line starts with the key type ssh-ed25519: an allowed signer's line starts with its principals"},
		{"options only", `alice namespaces="git"`, "line 1: no key after the options"},
		{"no base64 key", "alice ssh-ed25519", "line 1: no base64 key after the key type ssh-ed25519"},
		{"bad base64", "alice ssh-ed25519 !!!!", "line 1: ssh-ed25519 key is not valid base64"},
		{"not a key", "alice ssh-ed25519 AAAA", "line 1: ssh-ed25519 key cannot be read"},
		{"type does not match", rsaLine, "line 1: the key is a ssh-ed25519, but the line says ssh-rsa"},
		{"unknown key type", "alice ssh-foo " + b64, `line 1: "ssh-foo" is neither a supported key type nor an option`},
		{"unknown key type after options", `alice namespaces="git" ssh-foo ` + b64, `line 1: "ssh-foo" is not a supported key type`},
		{"unknown option", `alice foo="x" ` + k, `line 1: unknown option "foo"`},
		{"unknown flag", `alice no-touch-required,namespaces="git" ` + k, `line 1: unknown option "no-touch-required"`},
		{"unquoted value", "alice namespaces=git " + k, "line 1: option namespaces: the value must be in double quotes"},
		{"no value", "alice namespaces,valid-after=\"20230101\" " + k, `line 1: option namespaces needs a value`},
		{"unterminated quote", `alice namespaces="git ` + k, "line 1: an option's quoted value has no closing quote"},
		{"option twice", `alice namespaces="git",namespaces="file" ` + k, "line 1: option namespaces is given twice"},
		{"junk after value", `alice namespaces="git"x ` + k, `line 1: option namespaces: unexpected "x" after its quoted value`},
		{"trailing comma", `alice namespaces="git", ` + k, "line 1: the options end with a comma"},
		{"short time", `alice valid-after="2023" ` + k, `line 1: option valid-after: "2023" is not a time`},
		{"ten digits", `alice valid-after="2023010112Z" ` + k, `line 1: option valid-after: "2023010112Z" is not a time`},
		{"month 13", `alice valid-before="20231301Z" ` + k, `line 1: option valid-before: "20231301Z" is not a time`},
		{"signs", `alice valid-before="+0230101Z" ` + k, `line 1: option valid-before: "+0230101Z" is not a time`},
		{"window backwards", `alice valid-after="20240101Z",valid-before="20230101Z" ` + k,
			"line 1: valid-before (2023-01-01T00:00:00Z) is not after valid-after (2024-01-01T00:00:00Z)"},
		{"empty window", `alice valid-after="20240101Z",valid-before="20240101Z" ` + k, "is not after valid-after"},
		{"cert-authority", "*@example.com cert-authority " + k, "line 1: option cert-authority is not supported"},
		{"cert-authority among others", `*@example.com namespaces="git",cert-authority ` + k, "line 1: option cert-authority is not supported"},
		{"DSA", "alice ssh-dss " + b64, "line 1: key type ssh-dss: DSA keys (ssh-dss) sign with SHA-1"},
		{"certificate", "alice ssh-ed25519-cert-v01@openssh.com " + b64, "line 1: key type ssh-ed25519-cert-v01@openssh.com: certificates are not supported"},
		{"principals quote unclosed", `"alice ` + k, "line 1: the quoted principals have no closing quote"},
		{"no space after quoted principals", `"alice"` + k, "line 1: no space after the quoted principals"},
		{"quote inside principals", `al"ice ` + k, `line 1: principals "al\"ice": a quote may only open the field`},
		{"empty quoted principals", `"" ` + k, "line 1: empty principals"},
		{"line number", "# one\nalice " + k + "\n\nbroken\n", "line 4: no key after the principals"},
		{"too big", strings.Repeat("#", MaxAllowedSignersBytes+1), fmt.Sprintf("allowed signers are %d bytes, more than the limit of %d", MaxAllowedSignersBytes+1, MaxAllowedSignersBytes)},
		{"too many keys", strings.Repeat("alice "+k+"\n", MaxAllowedSigners+1), fmt.Sprintf("line %d: more than %d allowed signers", MaxAllowedSigners+1, MaxAllowedSigners)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := ParseAllowedSigners([]byte(tt.text))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ParseAllowedSigners() = %v, want an error containing %q", err, tt.want)
			}
			if a != nil {
				t.Errorf("ParseAllowedSigners() returned signers with its error")
			}
		})
	}
	// The limit itself is allowed.
	if a := mustAllowed(t, strings.Repeat("alice "+k+"\n", MaxAllowedSigners)); a.Len() != MaxAllowedSigners {
		t.Errorf("Len() = %d, want %d", a.Len(), MaxAllowedSigners)
	}
}

func TestMatchList(t *testing.T) {
	tests := []struct {
		patterns string
		want     bool
	}{
		{"git", true}, {"file", false}, {"file,git", true}, {"*", true}, {"g?t", true}, {"g*", true},
		{"gi", false}, {"git*", true}, {"*t", true}, {"*x*", false}, {"", false}, {"Git", false},
		{"*,!git", false}, {"!git,*", false}, {"!file,git", true}, {"!file", false}, {"**", true}, {"?", false},
	}
	for _, tt := range tests {
		if got := matchList("git", strings.Split(tt.patterns, ",")); got != tt.want {
			t.Errorf("matchList(git, %q) = %v, want %v", tt.patterns, got, tt.want)
		}
	}
}
