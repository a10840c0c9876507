package sigtest

import (
	pgperrors "github.com/ProtonMail/go-crypto/openpgp/errors"

	"recond.dev/recond/reconcile/source/git/signature"
	"recond.dev/recond/reconcile/source/sshsig"
)

// Case is the fixture object Name verified against the keys file Keys.
type Case struct {
	// Name is the object: objects/Name.commit or objects/Name.tag, the
	// branch or tag the end-to-end tests name it by.
	Name string
	// Keys is the trusted keys file under keys/; "trusted" when "".
	Keys string
	// Err is what the *signature.Error wraps (errors.Is); nil when the
	// signature verifies.
	Err error
	// Key is the key (its file under keys/) the signature names: the
	// Error's KeyID is KeyID(Key); "" for none.
	Key string
	// Msg is in the Error's message, after the commit (or tag), the signer
	// and the key.
	Msg string
}

// KeysFile is the trusted keys file of c.
func (c Case) KeysFile() string {
	if c.Keys == "" {
		return "trusted"
	}
	return c.Keys
}

const (
	notTrusted = "which is not in --trusted-keys-file"
	notAllowed = ", but --trusted-keys-file does not allow that key here: "
)

// Cases are every fixture object verified against the trusted keys
// (keys/trusted: the SSH keys of keys/allowed_signers, then the trusted and
// the expired OpenPGP keys), and some against a file with keys of one kind
// only. An object's tag signature counts, not its commit's.
func Cases() []Case {
	return []Case{
		// OpenPGP, signed by gpg through git.
		{Name: "pgp-good", Key: "pgp-trusted.asc"},
		{Name: "pgp-unknown", Key: "pgp-stranger.asc", Err: pgperrors.ErrUnknownIssuer, Msg: notTrusted},
		{Name: "pgp-forged", Key: "pgp-trusted.asc", Err: pgperrors.SignatureError("EdDSA verification failure"),
			Msg: "does not verify: openpgp: invalid signature: EdDSA verification failure"},
		{Name: "pgp-expired", Key: "pgp-expired.asc", Err: pgperrors.ErrKeyExpired, Msg: "does not verify: openpgp: key expired"},
		{Name: "v-pgp-good", Key: "pgp-trusted.asc"},
		{Name: "v-pgp-unknown", Key: "pgp-stranger.asc", Err: pgperrors.ErrUnknownIssuer, Msg: notTrusted},
		// A file with only SSH keys trusts no OpenPGP key.
		{Name: "pgp-good", Keys: "allowed_signers", Key: "pgp-trusted.asc", Err: pgperrors.ErrUnknownIssuer, Msg: notTrusted},

		// Unsigned.
		{Name: "unsigned", Err: signature.ErrUnsigned, Msg: "is unsigned; --verify-commits accepts only signatures by keys in --trusted-keys-file"},
		{Name: "v-unsigned", Err: signature.ErrUnsigned, Msg: "is unsigned"},

		// SSH, signed by ssh-keygen through git (gpg.format=ssh).
		{Name: "ssh-good", Key: "ssh-trusted.pub"},
		{Name: "ssh-in-window", Key: "ssh-expiring.pub"},
		{Name: "ssh-unknown", Key: "ssh-stranger.pub", Err: sshsig.ErrUnknownKey, Msg: notTrusted},
		{Name: "ssh-forged", Key: "ssh-trusted.pub", Err: sshsig.ErrBadSignature,
			Msg: "does not verify: bad signature: it does not match the signed message"},
		{Name: "ssh-namespace-file", Key: "ssh-trusted.pub", Err: sshsig.ErrBadSignature,
			Msg: `does not verify: bad signature: it is made for namespace "file", not "git"`},
		{Name: "ssh-expired", Key: "ssh-expiring.pub", Err: sshsig.ErrNotAllowed,
			Msg: notAllowed + "line 3 allows the key only until 2023-11-01T00:00:00Z (valid-before), not at 2023-11-14T22:13:20Z"},
		{Name: "ssh-wrong-namespaces", Key: "ssh-files.pub", Err: sshsig.ErrNotAllowed,
			Msg: notAllowed + `line 4 allows the key only for namespaces "file", not "git"`},
		{Name: "v-ssh-good", Key: "ssh-trusted.pub"},
		{Name: "v-ssh-in-window", Key: "ssh-expiring.pub"},
		{Name: "v-ssh-unknown", Key: "ssh-stranger.pub", Err: sshsig.ErrUnknownKey, Msg: notTrusted},
		{Name: "v-ssh-expired", Key: "ssh-expiring.pub", Err: sshsig.ErrNotAllowed, Msg: "(valid-before), not at 2023-11-14T22:13:20Z"},
		// A file with only OpenPGP keys trusts no SSH key.
		{Name: "ssh-good", Keys: "pgp-trusted.asc", Key: "ssh-trusted.pub", Err: sshsig.ErrUnknownKey, Msg: notTrusted},
	}
}
