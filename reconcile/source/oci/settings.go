package oci

import (
	"errors"
	"flag"
)

// Settings say how an oci:// source reaches its registry and which
// signatures its artifacts must carry: what a user sets, as flags.
type Settings struct {
	// CredentialsFile is a dockerconfigjson file (what `kubectl create
	// secret docker-registry` makes), read at every pull and resolve.
	CredentialsFile string
	// CAFile holds PEM certificates trusted for the registry's TLS, besides
	// the system's.
	CAFile string
	// Insecure speaks plain HTTP to the registry; only a loopback host is
	// allowed.
	Insecure bool
	// VerifyArtifacts refuses an artifact whose digest carries no cosign
	// signature by a key of CosignKeysFile (PEM public keys, read at every
	// check), once per digest.
	VerifyArtifacts bool
	CosignKeysFile  string
}

// BindFlags registers the --oci-* and artifact signature flags on fs.
func (o *Settings) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.CredentialsFile, "oci-credentials-file", "", "dockerconfigjson file of registry credentials (as `kubectl create secret docker-registry` makes), read at every pull")
	fs.StringVar(&o.CAFile, "oci-ca-file", "", "PEM certificates trusted for the registry's TLS, besides the system's")
	fs.BoolVar(&o.Insecure, "oci-insecure", false, "speak plain HTTP to the registry (only a loopback host is allowed)")
	fs.BoolVar(&o.VerifyArtifacts, "verify-artifacts", false, "render only artifacts whose digest carries a cosign signature by a key in --cosign-keys-file")
	fs.StringVar(&o.CosignKeysFile, "cosign-keys-file", "", "PEM public keys trusted to sign artifacts with cosign (with --verify-artifacts)")
}

// Validate checks the options' combinations.
func (o Settings) Validate() error {
	switch {
	case o.VerifyArtifacts && o.CosignKeysFile == "":
		return errors.New("--verify-artifacts needs --cosign-keys-file")
	case !o.VerifyArtifacts && o.CosignKeysFile != "":
		return errors.New("--cosign-keys-file is used only with --verify-artifacts")
	case o.Insecure && o.CAFile != "":
		return errors.New("--oci-ca-file is for TLS; --oci-insecure speaks plain HTTP")
	}
	return nil
}
