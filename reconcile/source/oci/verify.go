package oci

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"recond.dev/recond/internal/reason"
	"recond.dev/recond/reconcile/source/oci/cosign"
)

// verify refuses the artifact of digest rev unless it carries a
// cosign signature by a key of Settings.CosignKeysFile (in the
// sha256-<hex>.sig tag, or an OCI 1.1 referrer bundle). A digest is
// checked once per content of the keys file: the keys are read at every
// Fetch, so a key taken out refuses the next artifact it signed, and the
// current one again. The refusal is a *reason.Error with reason forbidden,
// naming the digest and the key.
func (s *Source) verify(ctx context.Context, rev string) error {
	o := s.cfg.Settings
	if !o.VerifyArtifacts {
		return nil
	}
	pem, err := os.ReadFile(o.CosignKeysFile)
	if err != nil {
		return &reason.Error{Reason: reason.Forbidden, Err: fmt.Errorf("read --cosign-keys-file: %w", errors.Unwrap(err))}
	}
	keys, err := cosign.ParseKeys(pem)
	if err != nil {
		return &reason.Error{Reason: reason.Forbidden, Err: fmt.Errorf("--cosign-keys-file: %w", err)}
	}
	sum := sha256.Sum256(pem)
	checked := rev + "@" + string(sum[:])
	s.mu.Lock()
	done := s.verified[rev] == checked
	s.mu.Unlock()
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
	repo, err := s.client.Repository()
	if err != nil {
		return err
	}
	if _, err := cosign.Verify(ctx, repo, manifestDesc(rev, len(raw)), keys); err != nil {
		var ce *cosign.Error
		if errors.As(err, &ce) {
			return &reason.Error{Reason: reason.Forbidden, Err: err}
		}
		return Classify(fmt.Errorf("check the signature of %s: %w", shortRev(rev), err))
	}
	s.mu.Lock()
	s.verified[rev] = checked
	s.mu.Unlock()
	return nil
}
