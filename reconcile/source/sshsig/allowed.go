package sshsig

import (
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

const (
	// MaxAllowedSignersBytes bounds the size of an allowed-signers file.
	MaxAllowedSignersBytes = 1 << 20
	// MaxAllowedSigners bounds the keys (lines) an allowed-signers file
	// lists.
	MaxAllowedSigners = 4096
)

// Signer is one line of an allowed-signers file.
type Signer struct {
	// Line is the line's number in the file, from 1.
	Line int
	// Principals is the first field, unquoted: whom the key belongs to, for
	// people to read. It is matched against nothing.
	Principals string
	Key        ssh.PublicKey
	// Namespaces are the patterns of the namespaces option; nil when the
	// line has none, and then the key may sign in every namespace.
	Namespaces []string
	// ValidAfter and ValidBefore bound when the key may sign, to the
	// second and both included; zero when the line does not bound it.
	ValidAfter, ValidBefore time.Time
}

// AllowedSigners is a parsed allowed-signers file. A nil or zero
// AllowedSigners lists no key.
type AllowedSigners struct {
	signers []Signer
	byKey   map[string][]int // a key's wire form: its lines, in file order
}

// Len is how many keys (lines) a lists.
func (a *AllowedSigners) Len() int {
	if a == nil {
		return 0
	}
	return len(a.signers)
}

// Signers returns a's lines, in file order.
func (a *AllowedSigners) Signers() []Signer {
	if a == nil {
		return nil
	}
	return slices.Clone(a.signers)
}

// lookup returns the lines that list key, in file order.
func (a *AllowedSigners) lookup(key ssh.PublicKey) []Signer {
	if a == nil {
		return nil
	}
	var out []Signer
	for _, i := range a.byKey[string(key.Marshal())] {
		out = append(out, a.signers[i])
	}
	return out
}

// ParseAllowedSigners reads an allowed-signers file (see the package
// documentation). Any line it cannot read, or refuses, fails the whole
// file with an error naming the line's number.
func ParseAllowedSigners(data []byte) (*AllowedSigners, error) {
	if len(data) > MaxAllowedSignersBytes {
		return nil, fmt.Errorf("allowed signers are %d bytes, more than the limit of %d", len(data), MaxAllowedSignersBytes)
	}
	a := &AllowedSigners{byKey: map[string][]int{}}
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimRight(line, "\r")
		if s := strings.TrimLeft(line, " \t"); s == "" || s[0] == '#' {
			continue
		}
		if len(a.signers) == MaxAllowedSigners {
			return nil, fmt.Errorf("line %d: more than %d allowed signers", i+1, MaxAllowedSigners)
		}
		sg, err := parseLine(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		sg.Line = i + 1
		k := string(sg.Key.Marshal())
		a.byKey[k] = append(a.byKey[k], len(a.signers))
		a.signers = append(a.signers, sg)
	}
	return a, nil
}

// keyTypes are the key types a line may list: OpenSSH's, less DSA.
var keyTypes = []string{
	ssh.KeyAlgoED25519, ssh.KeyAlgoSKED25519,
	ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521, ssh.KeyAlgoSKECDSA256,
	ssh.KeyAlgoRSA,
}

// refusedKeyTypes are key types that parse but that a line may not list,
// and why.
var refusedKeyTypes = map[string]string{
	ssh.InsecureKeyAlgoDSA:     "DSA keys (ssh-dss) sign with SHA-1 and are not supported",
	ssh.CertAlgoRSAv01:         "certificates are not supported: list the signer's own key",
	ssh.InsecureCertAlgoDSAv01: "certificates are not supported: list the signer's own key",
	ssh.CertAlgoECDSA256v01:    "certificates are not supported: list the signer's own key",
	ssh.CertAlgoECDSA384v01:    "certificates are not supported: list the signer's own key",
	ssh.CertAlgoECDSA521v01:    "certificates are not supported: list the signer's own key",
	ssh.CertAlgoSKECDSA256v01:  "certificates are not supported: list the signer's own key",
	ssh.CertAlgoED25519v01:     "certificates are not supported: list the signer's own key",
	ssh.CertAlgoSKED25519v01:   "certificates are not supported: list the signer's own key",
}

func isKeyType(s string) bool {
	_, refused := refusedKeyTypes[s]
	return refused || slices.Contains(keyTypes, s)
}

// parseLine reads `principals [options] keytype base64key [comment]`.
func parseLine(line string) (Signer, error) {
	var sg Signer
	s := strings.TrimLeft(line, " \t")
	principals, s, err := principalsField(s)
	if err != nil {
		return sg, err
	}
	if isKeyType(principals) {
		return sg, fmt.Errorf("the line starts with the key type %s: an allowed signer's line starts with its principals (such as an email address), then the key", principals)
	}
	sg.Principals = principals
	s = strings.TrimLeft(s, " \t")
	if s == "" {
		return sg, errors.New("no key after the principals (want: principals [options] keytype base64key [comment])")
	}
	field, rest := cut(s)
	if !isKeyType(field) {
		opts, after, err := optionsField(s)
		if err != nil {
			return sg, err
		}
		if err := parseOptions(opts, &sg); err != nil {
			return sg, err
		}
		s = strings.TrimLeft(after, " \t")
		if s == "" {
			return sg, errors.New("no key after the options (want: principals [options] keytype base64key [comment])")
		}
		field, rest = cut(s)
		if !isKeyType(field) {
			return sg, fmt.Errorf("%q is not a supported key type (one of %s)", field, strings.Join(keyTypes, ", "))
		}
	}
	if why, refused := refusedKeyTypes[field]; refused {
		return sg, fmt.Errorf("key type %s: %s", field, why)
	}
	b64, _ := cut(strings.TrimLeft(rest, " \t"))
	if b64 == "" {
		return sg, fmt.Errorf("no base64 key after the key type %s", field)
	}
	wire, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return sg, fmt.Errorf("%s key is not valid base64: %w", field, err)
	}
	key, err := ssh.ParsePublicKey(wire)
	if err != nil {
		return sg, fmt.Errorf("%s key cannot be read: %w", field, err)
	}
	if key.Type() != field {
		return sg, fmt.Errorf("the key is a %s, but the line says %s", key.Type(), field)
	}
	sg.Key = key
	return sg, nil
}

// cut splits s at its first space or tab.
func cut(s string) (field, rest string) {
	if i := strings.IndexAny(s, " \t"); i >= 0 {
		return s[:i], s[i:]
	}
	return s, ""
}

// principalsField reads the first field of s: up to a space or tab, or, when
// it starts with a double quote, up to the next one.
func principalsField(s string) (principals, rest string, err error) {
	if strings.HasPrefix(s, `"`) {
		end := strings.IndexByte(s[1:], '"')
		if end < 0 {
			return "", "", errors.New("the quoted principals have no closing quote")
		}
		principals, rest = s[1:1+end], s[2+end:]
		if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
			return "", "", errors.New("no space after the quoted principals")
		}
	} else {
		principals, rest = cut(s)
		if strings.Contains(principals, `"`) {
			return "", "", fmt.Errorf("principals %q: a quote may only open the field", principals)
		}
	}
	if principals == "" {
		return "", "", errors.New("empty principals")
	}
	return principals, rest, nil
}

// optionsField reads the options field at the start of s: up to a space or
// tab outside double quotes (a backslash escapes a quote), as ssh-keygen
// does.
func optionsField(s string) (opts, rest string, err error) {
	quoted := false
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && i+1 < len(s) && s[i+1] == '"':
			i++
		case s[i] == '"':
			quoted = !quoted
		case !quoted && (s[i] == ' ' || s[i] == '\t'):
			return s[:i], s[i:], nil
		}
	}
	if quoted {
		return "", "", errors.New("an option's quoted value has no closing quote")
	}
	return s, "", nil
}
