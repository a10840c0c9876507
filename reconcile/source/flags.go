package source

import (
	"errors"
	"flag"

	"recond.dev/recond/reconcile/source/manifest"
)

// BindFlags registers the flags of what a user sets on a Source (its
// credentials, signature checks, render limits and chart settings) on fs,
// bound to c's fields, with their defaults. The caller fills in the rest
// (URL, Ref, Path, CacheDir, Worker) and calls Validate after parsing.
func (c *Config) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Username, "git-username", "", "HTTPS basic-auth user name (default \"git\" when a password or token file is given)")
	fs.StringVar(&c.PasswordFile, "git-password-file", "", "file holding the HTTPS basic-auth password")
	fs.StringVar(&c.TokenFile, "git-token-file", "", "file holding an HTTPS access token (sent as the basic-auth password)")
	fs.StringVar(&c.SSHKeyFile, "git-ssh-key-file", "", "file holding the SSH private key")
	fs.StringVar(&c.KnownHostsFile, "git-known-hosts-file", "", "known_hosts file to verify SSH host keys against (required for SSH)")
	fs.BoolVar(&c.InsecureSkipHostKeyCheck, "insecure-skip-host-key-check", false, "connect over SSH without verifying the host key")
	c.Limits.BindFlags(fs)
	c.OCI.BindFlags(fs)
	c.Helm.HelmOptions.BindFlags(fs)
	fs.BoolVar(&c.VerifyCommits, "verify-commits", false, "render only commits (or, for a tag --ref, annotated tags) signed by a key in --trusted-keys-file")
	fs.StringVar(&c.TrustedKeysFile, "trusted-keys-file", "", "keys trusted to sign commits (with --verify-commits): armored OpenPGP public keys and/or SSH keys as allowed-signers lines (ssh-keygen's format: principals [options] keytype base64key); read at every fetch")
	fs.StringVar(&c.SOPSAgeKeysFile, FlagSOPSAgeKeysFile, "", "file of age identities (AGE-SECRET-KEY-1..., as SOPS_AGE_KEY_FILE) that decrypt the repository's SOPS-encrypted Secrets, secretGenerator sources and Helm values files; read at every render")
}

// FlagSOPSAgeKeysFile names Config.SOPSAgeKeysFile's flag.
const FlagSOPSAgeKeysFile = manifest.FlagSOPSAgeKeysFile

// Validate checks the fields BindFlags binds.
func (c *Config) Validate() error {
	switch {
	case c.VerifyCommits && c.TrustedKeysFile == "":
		return errors.New("--verify-commits needs --trusted-keys-file")
	case !c.VerifyCommits && c.TrustedKeysFile != "":
		return errors.New("--trusted-keys-file is used only with --verify-commits")
	}
	if err := c.Limits.Validate(); err != nil {
		return err
	}
	if err := c.OCI.Validate(); err != nil {
		return err
	}
	return c.Helm.HelmOptions.Validate()
}
