package manifest

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"
)

// FlagSOPSAgeKeysFile names the flag of the age keys file (the source's
// Config.SOPSAgeKeysFile), which errors about the keys name.
const FlagSOPSAgeKeysFile = "sops-age-keys-file"

// maxKeysFile bounds the keys file (a key is 74 bytes; the render worker
// reads a request of at most 1 MiB).
const maxKeysFile = 256 << 10

// DecryptError is a SOPS-encrypted file that could not be decrypted. It
// is wrapped in a *ManifestError (reason invalid) or an *Error (reason
// auth, no key opens it); its text names the file and, for auth, the
// recipients the file was encrypted for, never a value or a key.
type DecryptError struct {
	File string
	// Recipients are those the file's data key was encrypted for (age
	// recipients, and the other key types' names) when no key opened it.
	Recipients []string
	Err        error
}

func (e *DecryptError) Error() string { return e.Err.Error() }
func (e *DecryptError) Unwrap() error { return e.Err }

// ReadKeys reads the age keys file named by file: its content, or why it
// could not be read (nil and nil for "": no file).
func ReadKeys(file string) ([]byte, error) {
	if file == "" {
		return nil, nil
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("the age keys file (--%s): %w", FlagSOPSAgeKeysFile, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxKeysFile+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("the age keys file (--%s): %w", FlagSOPSAgeKeysFile, err)
	case len(data) > maxKeysFile:
		return nil, fmt.Errorf("the age keys file (--%s) is larger than %d bytes", FlagSOPSAgeKeysFile, maxKeysFile)
	}
	return data, nil
}

// Fingerprint identifies the keys a render used, as ReadKeys gave them: a
// changed keys file (or a change in whether it can be read) changes it.
func Fingerprint(keys []byte, keysErr error) [32]byte {
	h := sha256.New()
	h.Write(keys)
	if keysErr != nil {
		h.Write([]byte{0})
		h.Write([]byte(keysErr.Error()))
	}
	return [32]byte(h.Sum(nil))
}

// KeysFingerprint is the fingerprint of the age keys file named by file
// as it reads now.
func KeysFingerprint(file string) [32]byte { return Fingerprint(ReadKeys(file)) }

// ReadError is the source failing to give a file's content (an object
// missing or damaged in a clone, a cached layer that no longer matches its
// digest): not the revision's fault, so the source fetches afresh.
type ReadError struct{ Err error }

func (e *ReadError) Error() string { return e.Err.Error() }
func (e *ReadError) Unwrap() error { return e.Err }
