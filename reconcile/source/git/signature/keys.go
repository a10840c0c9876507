package signature

import (
	"bytes"
	"fmt"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"

	"recond.dev/recond/reconcile/source/sshsig"
)

// Keys are the keys a signature must be made by: those of a trusted keys
// file. Only ParseKeys makes them.
type Keys struct {
	// pgp are the OpenPGP public keys of every armored block of the file:
	// a file made with `cat a.asc b.asc` trusts both keys.
	pgp openpgp.EntityList
	// ssh are the file's SSH allowed signers.
	ssh *sshsig.AllowedSigners
}

const (
	pgpBegin = "-----BEGIN PGP "
	pgpEnd   = "-----END PGP "
)

// ParseKeys reads a trusted keys file, which may hold armored OpenPGP
// public keys, SSH allowed-signers lines (ssh-keygen's ALLOWED SIGNERS
// format), or both: an armored block runs from a line that starts with
// "-----BEGIN PGP " to the next line that starts with "-----END PGP ",
// and every other line is an allowed-signers line, a # comment or blank.
// A file with no key at all, a block that is not a public key or cannot be
// read, or a line that is not an allowed signer, is an error naming the
// block or line; the caller names the file.
func ParseKeys(b []byte) (*Keys, error) {
	blocks, rest, err := splitArmored(b)
	if err != nil {
		return nil, err
	}
	var keys openpgp.EntityList
	for i, blk := range blocks {
		n := i + 1
		block, err := armor.Decode(bytes.NewReader(blk.text))
		if err != nil {
			return nil, fmt.Errorf("armored block %d (line %d): %w", n, blk.line, err)
		}
		if block.Type != openpgp.PublicKeyType {
			return nil, fmt.Errorf("armored block %d (line %d) is a %q, want %q", n, blk.line, block.Type, openpgp.PublicKeyType)
		}
		el, err := openpgp.ReadKeyRing(block.Body)
		if err != nil {
			return nil, fmt.Errorf("armored block %d (line %d): %w", n, blk.line, err)
		}
		keys = append(keys, el...)
	}
	signers, err := sshsig.ParseAllowedSigners(rest)
	if err != nil {
		return nil, fmt.Errorf("SSH allowed signers: %w (outside the armored OpenPGP blocks, every line is an allowed signer, a # comment or blank)", err)
	}
	if len(keys) == 0 && signers.Len() == 0 {
		return nil, fmt.Errorf("no key found: neither an armored OpenPGP public key (%q) nor an SSH allowed-signers line", openpgp.PublicKeyType)
	}
	return &Keys{pgp: keys, ssh: signers}, nil
}

// armoredBlock is one armored OpenPGP block of a keys file.
type armoredBlock struct {
	line int // of its BEGIN line, from 1
	text []byte
}

// splitArmored cuts the armored OpenPGP blocks out of a keys file. rest is
// the file with each block's lines left empty, so that the lines around
// them keep their numbers.
func splitArmored(b []byte) (blocks []armoredBlock, rest []byte, err error) {
	lines := bytes.SplitAfter(b, []byte("\n"))
	var out bytes.Buffer
	for i := 0; i < len(lines); i++ {
		if !bytes.HasPrefix(bytes.TrimLeft(lines[i], " \t"), []byte(pgpBegin)) {
			out.Write(lines[i])
			continue
		}
		blk := armoredBlock{line: i + 1}
		for ; i < len(lines); i++ {
			blk.text = append(blk.text, lines[i]...)
			out.WriteByte('\n')
			if bytes.HasPrefix(bytes.TrimLeft(lines[i], " \t"), []byte(pgpEnd)) {
				break
			}
		}
		if i == len(lines) {
			return nil, nil, fmt.Errorf("armored block %d (line %d) has no %q line", len(blocks)+1, blk.line, pgpEnd+"...-----")
		}
		blocks = append(blocks, blk)
	}
	return blocks, out.Bytes(), nil
}
