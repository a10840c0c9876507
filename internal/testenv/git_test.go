package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// TestRepoEpoch: with an Epoch, the same commits make the same SHAs.
func TestRepoEpoch(t *testing.T) {
	build := func() (string, string) {
		r := NewRepoWith(t, RepoOptions{Branch: "master", Author: "Test", Epoch: time.Unix(1_700_000_000, 0)})
		c1 := r.Commit("one", map[string]string{"a.yaml": "a: 1\n"})
		return c1, r.Tag("v1", c1, true)
	}
	c1, t1 := build()
	c2, t2 := build()
	if c1 != c2 || t1 != t2 {
		t.Fatalf("commits %s, %s and tags %s, %s differ", c1, c2, t1, t2)
	}
	r := NewRepoWith(t, RepoOptions{Branch: "master", Author: "Test", Epoch: time.Unix(1_700_000_000, 0)})
	c, err := r.Git().CommitObject(plumbing.NewHash(r.Commit("x", map[string]string{"x": "x\n"})))
	if err != nil {
		t.Fatal(err)
	}
	if c.Author.Name != "Test" || !c.Author.When.Equal(time.Unix(1_700_000_060, 0)) {
		t.Errorf("author %s at %s", c.Author.Name, c.Author.When)
	}
	if head, err := r.Git().Head(); err != nil || head.Name() != plumbing.NewBranchReferenceName("master") {
		t.Errorf("HEAD %v (%v), want master", head, err)
	}
}

// TestRepoStageAll: a link the test made in the work tree is committed with
// the files, and a removed file is gone.
func TestRepoStageAll(t *testing.T) {
	r := NewRepoWith(t, RepoOptions{StageAll: true})
	r.Commit("one", map[string]string{"a.yaml": "a\n", "b.yaml": "b\n"})
	if err := os.Symlink("a.yaml", filepath.Join(r.Dir, "link.yaml")); err != nil {
		t.Fatal(err)
	}
	c, err := r.Git().CommitObject(plumbing.NewHash(r.Commit("two", map[string]string{"b.yaml": ""})))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	files, _ := c.Files()
	_ = files.ForEach(func(f *object.File) error { names = append(names, f.Name); return nil })
	if strings.Join(names, ",") != "a.yaml,link.yaml" {
		t.Errorf("tree %v, want a.yaml and link.yaml", names)
	}
}

// TestRepoCommitSigned: OpenRepo commits into a repository already made,
// signed by the key.
func TestRepoCommitSigned(t *testing.T) {
	key, err := openpgp.NewEntity("Signer", "", "signer@example.com", nil)
	if err != nil {
		t.Fatal(err)
	}
	r := NewRepo(t)
	r.Commit("one", map[string]string{"a.yaml": "a\n"})
	sha := OpenRepo(t, r.Dir).CommitSigned("signed", key, map[string]string{"a.yaml": "b\n"})
	c, err := r.Git().CommitObject(plumbing.NewHash(sha))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Verify(armored(t, key)); err != nil {
		t.Errorf("verify: %v", err)
	}
}

func armored(t *testing.T, key *openpgp.Entity) string {
	t.Helper()
	var b strings.Builder
	w, err := armor.Encode(&b, openpgp.PublicKeyType, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := key.Serialize(w); err != nil {
		t.Fatal(err)
	}
	w.Close()
	return b.String()
}
