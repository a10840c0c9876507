package sops

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"filippo.io/age"
)

// maxIdentities bounds the identities a keys file may hold (each is tried
// on every age entry).
const maxIdentities = 64

// ParseIdentities parses a keys file in SOPS_AGE_KEY_FILE format: one age
// identity a line (AGE-SECRET-KEY-1… for X25519, AGE-SECRET-KEY-PQ-1… for
// ML-KEM-768+X25519, as age-keygen and age-keygen -pq write them), lines
// starting with # and blank lines ignored, surrounding blanks trimmed. Its
// errors name the line, never quote it.
func ParseIdentities(data []byte) ([]age.Identity, error) {
	var ids []age.Identity
	n := 0
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		n++
		s := strings.TrimSpace(string(line))
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		if !utf8.ValidString(s) {
			return nil, fmt.Errorf("age keys: line %d is not valid UTF-8", n)
		}
		var (
			id  age.Identity
			err error
		)
		switch {
		case strings.HasPrefix(s, "AGE-SECRET-KEY-PQ-1"):
			id, err = age.ParseHybridIdentity(s)
		case strings.HasPrefix(s, "AGE-SECRET-KEY-1"):
			id, err = age.ParseX25519Identity(s)
		case strings.HasPrefix(s, "AGE-PLUGIN-"):
			return nil, fmt.Errorf("age keys: line %d is an age plugin identity, which is not supported (plugins are programs)", n)
		default:
			return nil, fmt.Errorf("age keys: line %d is not an age identity (AGE-SECRET-KEY-1… or AGE-SECRET-KEY-PQ-1…)", n)
		}
		if err != nil {
			// age's message may describe the key's characters: not quoted.
			return nil, fmt.Errorf("age keys: line %d is a malformed age identity", n)
		}
		if len(ids) == maxIdentities {
			return nil, fmt.Errorf("age keys: more than %d identities", maxIdentities)
		}
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return nil, errors.New("age keys: no identity (AGE-SECRET-KEY-1…) in the file")
	}
	return ids, nil
}
