// Package sshsig verifies SSH signatures (the SSHSIG format of OpenSSH's
// PROTOCOL.sshsig, made by `ssh-keygen -Y sign` and by git with
// gpg.format=ssh) against the keys of an allowed-signers file, as
// `ssh-keygen -Y verify` does.
//
// [ParseAllowedSigners] reads an allowed-signers file (ssh-keygen(1),
// ALLOWED SIGNERS): one signer a line, `principals [options] keytype
// base64key [comment]`, with blank lines and `#` comments skipped. The
// options are those of ssh-keygen: namespaces="pattern,..." (the signature
// namespaces the key may sign in; `*` and `?` match as in ssh_config, a
// leading `!` excludes), valid-after="time" and valid-before="time"
// (YYYYMMDD, YYYYMMDDHHMM or YYYYMMDDHHMMSS, in the local time zone, or UTC
// with a Z or UTC suffix); option values are in double quotes, as
// ssh-keygen requires. cert-authority (trusting certificates signed by a
// CA key), certificate keys and DSA keys are refused with an error naming
// the line, as is any line that cannot be read. The principals are kept
// but not matched against anything: a key listed is trusted, whoever it
// names. A file is at most [MaxAllowedSignersBytes] and lists at most
// [MaxAllowedSigners] keys.
//
// [Parse] reads an armored signature (-----BEGIN SSH SIGNATURE-----): the
// magic "SSHSIG", version 1, the signer's public key, the namespace, a
// reserved field (ignored, as the protocol says), the hash algorithm and
// the signature; anything else, trailing bytes included, is an
// [ErrMalformed]. [Signature.Verify] then checks, in this order:
//
//   - the key is listed in the allowed signers ([ErrUnknownKey]);
//   - a line listing it allows the namespace and the signing time
//     ([ErrNotAllowed], a *[NotAllowedError] naming each line and why);
//   - the signature is made for the namespace asked for ([ErrBadSignature]);
//   - the hash is sha256 or sha512, and an RSA key signed with
//     rsa-sha2-256 or rsa-sha2-512, never ssh-rsa, which is SHA-1
//     ([ErrUnsupported]);
//   - the signature verifies, with golang.org/x/crypto/ssh, over
//     "SSHSIG" || string(namespace) || string("") || string(hash algorithm)
//     || string(H(message)), the data ssh-keygen signs ([ErrBadSignature]).
//
// Listing before verifying means no signature by an unknown key costs more
// than a parse. The signing time is whatever the caller says it is (git
// passes the commit's committer date): it is the signer's claim, not a
// trusted clock.
package sshsig
