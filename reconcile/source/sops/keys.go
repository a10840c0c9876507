package sops

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"filippo.io/age"
	"filippo.io/age/armor"
)

// maxStanzas bounds the recipient stanzas of one age entry's header (sops
// writes one), so that the identities are tried a bounded number of times:
// at most maxMasterKeys × maxStanzas × maxIdentities unwraps a file.
const maxStanzas = 8

var (
	errNoMatch   = errors.New("no identity matches")
	errMalformed = errors.New("malformed age entry")
	errStanzas   = errors.New("too many stanzas")
)

// openAge opens one age entry (an armored age file) with ids: errNoMatch
// when none of them is a recipient, errMalformed when it is not a valid
// age file or its payload does not authenticate, errStanzas when its
// header has more than maxStanzas recipient stanzas.
func openAge(enc string, ids []age.Identity) ([]byte, error) {
	hdr, err := age.ExtractHeader(armor.NewReader(strings.NewReader(enc)))
	if err != nil {
		return nil, errMalformed
	}
	if bytes.Count(hdr, []byte("\n-> ")) > maxStanzas {
		return nil, errStanzas
	}
	r, err := age.Decrypt(armor.NewReader(strings.NewReader(enc)), ids...)
	if err != nil {
		var nm *age.NoIdentityMatchError
		if errors.As(err, &nm) {
			return nil, errNoMatch
		}
		return nil, errMalformed
	}
	// A data key is 32 bytes, a Shamir share 33: read no more than that.
	b, err := io.ReadAll(io.LimitReader(r, keySize+2))
	if err != nil {
		return nil, errMalformed
	}
	return b, nil
}

// dataKey recovers the file's data key: from the one group, or from
// shamir_threshold groups' shares. Only age entries are opened.
func (md *metadata) dataKey(ids []age.Identity) ([]byte, error) {
	var (
		shares    [][]byte
		closed    []masterKey // the keys of the groups that did not open
		malformed int
	)
	for _, g := range md.groups {
		var part []byte
		for _, k := range g {
			if k.typ != "age" || k.enc == "" || len(ids) == 0 {
				continue
			}
			b, err := openAge(k.enc, ids)
			if errors.Is(err, errStanzas) {
				return nil, invalidf("the age entry for %s has more than %d recipient stanzas", short(k.name), maxStanzas)
			}
			if errors.Is(err, errMalformed) {
				malformed++
			}
			if err == nil {
				part = b
				break
			}
		}
		if part == nil {
			closed = append(closed, g...)
			continue
		}
		shares = append(shares, part)
		if len(md.groups) > 1 && len(shares) == md.threshold {
			break // enough shares: the other groups need not be opened
		}
	}

	if len(md.groups) == 1 {
		if len(shares) == 1 {
			if len(shares[0]) != keySize {
				return nil, invalidf("the data key in the file's age entry is %d bytes, not %d", len(shares[0]), keySize)
			}
			return shares[0], nil
		}
		msg := "no identity opens the file's data key"
		if len(ids) == 0 {
			msg = "no age identity was given to open the file's data key"
		}
		return nil, authError(closed, malformed, msg)
	}
	if len(shares) < md.threshold {
		return nil, authError(closed, malformed, fmt.Sprintf("the file's data key is split across %d key groups, %d of which must open: %d did", len(md.groups), md.threshold, len(shares)))
	}
	for _, s := range shares {
		if len(s) != keySize+1 {
			return nil, invalidf("a Shamir share in the file's age entries is %d bytes, not %d", len(s), keySize+1)
		}
	}
	key, err := shamirCombine(shares)
	if err != nil {
		return nil, invalidf("the file's Shamir shares do not combine: %v", err)
	}
	return key, nil
}

// short abbreviates a long recipient (a post-quantum one) for a message.
func short(s string) string {
	if len(s) <= 100 {
		return s
	}
	return s[:40] + "…" + s[len(s)-12:]
}

// authError is the error of a data key no identity opens, naming what it
// is encrypted for.
func authError(keys []masterKey, malformed int, msg string) *Error {
	var b strings.Builder
	b.WriteString(msg)
	var recipients []string
	others := false
	for i, k := range keys {
		recipients = append(recipients, k.name)
		others = others || k.typ != "age"
		if i == 0 {
			b.WriteString("; encrypted for ")
		} else {
			b.WriteString(", ")
		}
		b.WriteString(short(k.name))
	}
	if malformed > 0 {
		fmt.Fprintf(&b, "; %d age entries are not valid age files", malformed)
	}
	if others {
		b.WriteString(" (only age keys are used here: PGP, KMS, Vault and the other key services are never contacted)")
	}
	return &Error{Reason: ReasonAuth, Recipients: recipients, Err: errors.New(b.String())}
}

// decryptDocs recovers the data key, then decrypts and verifies every
// document, in order, and the MAC over them all. utf8: a decrypted string
// must be UTF-8 (YAML, JSON).
func decryptDocs(md *metadata, docs []*node, ids []age.Identity, utf8 bool) (*walker, error) {
	key, err := md.dataKey(ids)
	if err != nil {
		return nil, err
	}
	aead, err := newAEAD(key)
	if err != nil {
		return nil, invalidf("the data key does not make an AES-256-GCM cipher")
	}
	w := newWalker(md.rules, aead, md.macOnly)
	w.utf8 = utf8
	for _, d := range docs {
		if err := w.walkDoc(d); err != nil {
			return nil, err
		}
	}
	if err := w.checkMAC(md); err != nil {
		return nil, err
	}
	return w, nil
}
