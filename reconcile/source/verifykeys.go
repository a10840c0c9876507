package source

import (
	"bytes"
	"errors"
	"fmt"
	"os"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"

	"recond.dev/recond/reconcile/source/sshsig"
)

// trustedKeys are the keys of Config.TrustedKeysFile.
type trustedKeys struct {
	// pgp is every OpenPGP public key of the file as one armored key ring,
	// "" when it has none: go-git's Verify reads only the first block of
	// what it is given, and a file made with `cat a.asc b.asc` must trust
	// both keys.
	pgp string
	// ssh are the file's SSH allowed signers.
	ssh *sshsig.AllowedSigners
}

const (
	pgpBegin = "-----BEGIN PGP "
	pgpEnd   = "-----END PGP "
)

// readTrustedKeys reads file, which may hold armored OpenPGP public keys,
// SSH allowed-signers lines (ssh-keygen's ALLOWED SIGNERS format), or
// both: an armored block runs from a line that starts with
// "-----BEGIN PGP " to the next line that starts with "-----END PGP ",
// and every other line is an allowed-signers line, a # comment or blank.
// A file with no key at all, a block that is not a public key or cannot be
// read, or a line that is not an allowed signer, is an error naming the
// file and the block or line.
func readTrustedKeys(file string) (trustedKeys, error) {
	if file == "" {
		return trustedKeys{}, errors.New("--verify-commits needs --trusted-keys-file")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return trustedKeys{}, fmt.Errorf("read --trusted-keys-file: %w", err)
	}
	blocks, rest, err := splitArmored(b)
	if err != nil {
		return trustedKeys{}, fmt.Errorf("--trusted-keys-file %s: %w", file, err)
	}
	var keys openpgp.EntityList
	for i, blk := range blocks {
		n := i + 1
		block, err := armor.Decode(bytes.NewReader(blk.text))
		if err != nil {
			return trustedKeys{}, fmt.Errorf("--trusted-keys-file %s: armored block %d (line %d): %w", file, n, blk.line, err)
		}
		if block.Type != openpgp.PublicKeyType {
			return trustedKeys{}, fmt.Errorf("--trusted-keys-file %s: armored block %d (line %d) is a %q, want %q", file, n, blk.line, block.Type, openpgp.PublicKeyType)
		}
		el, err := openpgp.ReadKeyRing(block.Body)
		if err != nil {
			return trustedKeys{}, fmt.Errorf("--trusted-keys-file %s: armored block %d (line %d): %w", file, n, blk.line, err)
		}
		keys = append(keys, el...)
	}
	signers, err := sshsig.ParseAllowedSigners(rest)
	if err != nil {
		return trustedKeys{}, fmt.Errorf("--trusted-keys-file %s: SSH allowed signers: %w (outside the armored OpenPGP blocks, every line is an allowed signer, a # comment or blank)", file, err)
	}
	if len(keys) == 0 && signers.Len() == 0 {
		return trustedKeys{}, fmt.Errorf("--trusted-keys-file %s: no key found: neither an armored OpenPGP public key (%q) nor an SSH allowed-signers line", file, openpgp.PublicKeyType)
	}
	ring, err := armorKeyRing(keys)
	if err != nil {
		return trustedKeys{}, fmt.Errorf("--trusted-keys-file %s: %w", file, err)
	}
	return trustedKeys{pgp: ring, ssh: signers}, nil
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

// armorKeyRing writes keys as one armored key ring, "" when there are none.
func armorKeyRing(keys openpgp.EntityList) (string, error) {
	if len(keys) == 0 {
		return "", nil
	}
	var out bytes.Buffer
	w, err := armor.Encode(&out, openpgp.PublicKeyType, nil)
	if err != nil {
		return "", err
	}
	for _, e := range keys {
		if err := e.Serialize(w); err != nil {
			return "", fmt.Errorf("key %X: %w", e.PrimaryKey.KeyId, err)
		}
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	return out.String(), nil
}
