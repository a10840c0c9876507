package render

import "recond.dev/recond/reconcile/source/manifest"

// What a render hands its callers is package manifest's; these are its
// names as the renderers know them.
type (
	// Manifest is one Kubernetes object read from the repository.
	Manifest = manifest.Manifest
	// ManifestError reports a manifest that cannot be read or is not a
	// valid object.
	ManifestError = manifest.ManifestError
	// Limits bound the work a commit can make rendering do.
	Limits = manifest.Limits
	// LimitError reports a render that exceeded one of its Limits.
	LimitError = manifest.LimitError
	// ReadError is the source failing to give a file's content.
	ReadError = manifest.ReadError
	// DecryptError is a SOPS-encrypted file that could not be decrypted.
	DecryptError = manifest.DecryptError
)

// DefaultLimits are the limits used for zero fields of Limits.
var DefaultLimits = manifest.DefaultLimits

// Names of the limits, as LimitError.Limit reports them.
const (
	LimitBytes          = manifest.LimitBytes
	LimitObjects        = manifest.LimitObjects
	LimitFileBytes      = manifest.LimitFileBytes
	LimitDepth          = manifest.LimitDepth
	LimitAliasExpansion = manifest.LimitAliasExpansion
	LimitMemory         = manifest.LimitMemory
	LimitFiles          = manifest.LimitFiles
)

// FlagSOPSAgeKeysFile names the flag of the age keys file.
const FlagSOPSAgeKeysFile = manifest.FlagSOPSAgeKeysFile

// LimitFlag is the command-line flag that sets limit, or "".
func LimitFlag(limit string) string { return manifest.LimitFlag(limit) }

// NewLimitError is manifest.NewLimitError.
func NewLimitError(limit string, value, max int64, file string) *ManifestError {
	return manifest.NewLimitError(limit, value, max, file)
}

// KeysFingerprint is the fingerprint of the age keys file named by file
// as it reads now (Budget.KeysFingerprint of a render that read it).
func KeysFingerprint(file string) [32]byte { return manifest.KeysFingerprint(file) }
