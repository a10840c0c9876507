package git

import (
	"errors"
	"fmt"
	"os"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"recond.dev/recond/reconcile/source/fetch"
	"recond.dev/recond/reconcile/source/git/signature"
)

// verify checks that rev is signed by a trusted key: the annotated tag the
// ref named, if it named one, otherwise the commit itself (package
// signature checks what the object holds). The keys file is read on every
// call, so keys can be rotated without a restart.
func (s *Source) verify(rev fetch.Revision) error {
	keys, err := readTrustedKeys(s.cfg.TrustedKeysFile)
	if err != nil {
		return err
	}
	repo, err := s.open()
	if err != nil {
		return err
	}
	tip := plumbing.NewHash(rev.Tip)
	if tip.IsZero() {
		tip = plumbing.NewHash(rev.SHA)
	}
	obj, err := repo.Object(plumbing.AnyObject, tip)
	if err != nil {
		return fmt.Errorf("verify %s: %w", tip, err)
	}
	switch o := obj.(type) {
	case *object.Tag:
		return keys.VerifyTag(o, rev.SHA)
	case *object.Commit:
		return keys.VerifyCommit(o)
	}
	return fmt.Errorf("verify %s: a %s cannot be signed", tip, obj.Type())
}

// readTrustedKeys reads Options.TrustedKeysFile (signature.ParseKeys says
// what it may hold); its errors name the file.
func readTrustedKeys(file string) (*signature.Keys, error) {
	if file == "" {
		return nil, errors.New("--verify-commits needs --trusted-keys-file")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read --trusted-keys-file: %w", err)
	}
	keys, err := signature.ParseKeys(b)
	if err != nil {
		return nil, fmt.Errorf("--trusted-keys-file %s: %w", file, err)
	}
	return keys, nil
}
