package source

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"recond.dev/recond/reconcile/source/oci/cosign"
	"recond.dev/recond/reconcile/source/oci"
)

// verifyArtifact refuses the artifact of digest rev unless it carries a
// cosign signature by a key of OCIOptions.CosignKeysFile (in the
// sha256-<hex>.sig tag, or an OCI 1.1 referrer bundle). A digest is
// checked once per content of the keys file: the keys are read at every
// Fetch, so a key taken out refuses the next artifact it signed, and the
// current one again. The refusal is an *Error with reason forbidden,
// naming the digest and the key.
func (s *Source) verifyArtifact(ctx context.Context, rev string) error {
	o := s.cfg.OCI
	if !o.VerifyArtifacts {
		return nil
	}
	pem, err := os.ReadFile(o.CosignKeysFile)
	if err != nil {
		return &Error{Reason: ReasonForbidden, Err: fmt.Errorf("read --cosign-keys-file: %w", errors.Unwrap(err))}
	}
	keys, err := cosign.ParseKeys(pem)
	if err != nil {
		return &Error{Reason: ReasonForbidden, Err: fmt.Errorf("--cosign-keys-file: %w", err)}
	}
	sum := sha256.Sum256(pem)
	checked := rev + "@" + string(sum[:])
	v := s.oci
	v.mu.Lock()
	done := v.verified[rev] == checked
	v.mu.Unlock()
	if done {
		return nil
	}
	raw, err := os.ReadFile(filepath.Join(s.artifactDir(rev), "manifest.json"))
	if err != nil {
		return &cacheError{err}
	}
	if sum := sha256.Sum256(raw); "sha256:"+hex.EncodeToString(sum[:]) != rev {
		// Damaged since the pull: pull it again rather than judge it.
		_ = os.RemoveAll(s.artifactDir(rev))
		return &cacheError{fmt.Errorf("the cached manifest of %s is damaged", shortRev(rev))}
	}
	repo, err := v.client.Repository()
	if err != nil {
		return err
	}
	if _, err := cosign.Verify(ctx, repo, manifestDesc(rev, len(raw)), keys); err != nil {
		var ce *cosign.Error
		if errors.As(err, &ce) {
			return &Error{Reason: ReasonForbidden, Err: err}
		}
		return oci.Classify(fmt.Errorf("check the signature of %s: %w", shortRev(rev), err))
	}
	v.mu.Lock()
	v.verified[rev] = checked
	v.mu.Unlock()
	return nil
}
