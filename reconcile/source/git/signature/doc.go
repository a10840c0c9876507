// Package signature verifies the OpenPGP and SSH signatures of Git commits
// and annotated tags against trusted keys. It reads what an object holds
// (the payload a signature covers, the armored signature, the committer's
// or tagger's name and date) and nothing else: no repository, no network,
// no clock for SSH.
//
// [ParseKeys] reads a trusted keys file: armored OpenPGP public keys, SSH
// keys as allowed-signers lines (ssh-keygen's ALLOWED SIGNERS format), or
// both. [Keys.VerifyCommit] and [Keys.VerifyTag] check an object's own
// signature and say why they refuse it with an *[Error] naming the commit,
// the tag and the key; [Keys.Verify] is the same check on a payload and its
// armored signature. An OpenPGP signature is checked with
// github.com/ProtonMail/go-crypto as go-git's Verify does; an SSH signature
// (git's gpg.format=ssh) with package sshsig, in namespace "git", at the
// committer's (or tagger's) date as the object states it, as git
// verify-commit does; its key id is the key's SHA256 fingerprint.
//
// The tests run one table (package sigtest) over commits and tags that the
// real git, gpg and ssh-keygen signed once (testdata/generate.sh).
package signature
