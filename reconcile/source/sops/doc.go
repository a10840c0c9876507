// Package sops decrypts, in-process, files encrypted by SOPS
// (github.com/getsops/sops, version 3 of its file format) with age keys.
//
// [Decrypt] takes a file's bytes, its [Format] ([FormatOf] decides it from
// the file name as sops does) and the age identities that may open it
// ([ParseIdentities] reads them from a keys file, as SOPS_AGE_KEY_FILE), and
// returns the plaintext in the same format with the sops metadata removed,
// together with every value that was encrypted, so that the caller can keep
// them out of what it prints. [Encrypted] tells a file that carries sops
// metadata from one that does not, cheaply and without error.
//
// What the file format is, as implemented here (sops 3.13.3, checked
// against files its CLI writes):
//
//   - A value is stored as ENC[AES256_GCM,data:…,iv:…,tag:…,type:…]:
//     AES-256-GCM with a 32-byte nonce under the file's 32-byte data key,
//     authenticated with the path of mapping keys from the document root
//     to the value, each followed by ":" (list indices are not part of it).
//     Empty strings and nulls are never encrypted. The type (str, int,
//     float, bool, time) is restored; an encrypted comment, which sops
//     writes as a list element when the comment sat in a list, is dropped
//     like every other comment.
//   - Which values are encrypted follows the file's one rule
//     (unencrypted_suffix "_unencrypted" when it has none; encrypted_suffix,
//     encrypted_regex, unencrypted_regex, encrypted_comment_regex or
//     unencrypted_comment_regex otherwise), applied as sops applies it, and
//     is verified both ways: a value the rule says is encrypted must be, and
//     one it says is plain must not look encrypted.
//   - The MAC, a SHA-512 over every value (or, with mac_only_encrypted,
//     over a fixed prefix and the encrypted values only) in file order,
//     across all the documents of a multi-document YAML file, is stored
//     encrypted with lastmodified (in RFC 3339, as sops re-formats it) as
//     its additional data. It is always verified: a file whose MAC does not
//     match is refused, whatever changed.
//   - The data key is wrapped for each master key of one key group (the
//     lists age, pgp, kms… at the top of the metadata), or split with
//     Shamir's scheme (GF(2^8), AES's polynomial; 33-byte shares whose last
//     byte is the x coordinate) across key_groups, shamir_threshold of
//     which must open.
//
// It is sealed: it never opens a network connection, never starts a process
// and reads no file or environment variable. Only age entries are opened,
// with X25519 and ML-KEM-768+X25519 (post-quantum) identities; KMS, GCP KMS,
// Azure Key Vault, HashiCorp Vault, HuaweiCloud KMS and PGP entries are
// never used, only named in the error when no age entry opens the file.
// Passphrase (scrypt), SSH and plugin identities are refused.
//
// It refuses, with an [Error] whose Reason is invalid: a file whose MAC or
// any value does not authenticate (a changed byte, a value moved to another
// key, a changed lastmodified), a value that the file's rule says is
// encrypted and is not or the reverse, YAML anchors and aliases (sops never
// writes them, and their expansion is unbounded), duplicate keys, an INI
// file (sops can write one; recond reads none), and files beyond fixed
// bounds (64 master keys, 16 key groups, 8 stanzas in an age header,
// nesting 256 deep). A file that no identity opens is an Error whose Reason
// is auth and whose Recipients name what it was encrypted for. No error
// quotes a value of the file or a key: only key paths, recipients and
// counts.
//
// Why not the sops library: it links the cloud SDKs of every key service,
// gRPC, a gpg executor and an audit hook that reads /etc/sops/audit.yaml
// at init; and during decryption it tries every master key the file lists,
// in an order where cloud KMS and PGP come before or next to age. The key
// list is not covered by the MAC, so whoever can write to the repository
// could make a decryption reach the network or run gpg. This package
// implements the format from its description and from files the sops CLI
// writes; the tests decrypt files made by the real CLI (built from
// tools/sops) with keys made by age-keygen.
package sops
