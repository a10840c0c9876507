package sigtest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"golang.org/x/crypto/ssh"
)

// Path is a file of package signature's testdata, as a path the test can
// open: Path("keys", "trusted") is the trusted keys file.
func Path(elem ...string) string {
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		panic("sigtest: no caller information to find testdata")
	}
	return filepath.Join(append([]string{filepath.Dir(self), "..", "testdata"}, elem...)...)
}

// Read reads Path(elem...).
func Read(t testing.TB, elem ...string) []byte {
	t.Helper()
	b, err := os.ReadFile(Path(elem...))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Names are the names of the fixture objects (objects/NAME.commit and
// objects/NAME.tag), sorted.
func Names(t testing.TB) []string {
	t.Helper()
	entries, err := os.ReadDir(Path("objects"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		name, ext, _ := strings.Cut(e.Name(), ".")
		if ext == "commit" || ext == "tag" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// raw is the fixture object name, encoded.
func raw(t testing.TB, name string) plumbing.EncodedObject {
	t.Helper()
	for typ, ext := range map[plumbing.ObjectType]string{plumbing.CommitObject: ".commit", plumbing.TagObject: ".tag"} {
		b, err := os.ReadFile(Path("objects", name+ext))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		return encoded(typ, b)
	}
	t.Fatalf("sigtest: no object %q in %s", name, Path("objects"))
	return nil
}

func encoded(typ plumbing.ObjectType, b []byte) plumbing.EncodedObject {
	var o plumbing.MemoryObject
	o.SetType(typ)
	o.SetSize(int64(len(b)))
	o.Write(b) // a MemoryObject's Write does not fail
	return &o
}

// Object is the fixture object name, decoded: an *object.Commit or an
// *object.Tag, with its hash.
func Object(t testing.TB, name string) object.Object {
	t.Helper()
	o, err := object.DecodeObject(nil, raw(t, name))
	if err != nil {
		t.Fatalf("sigtest: object %s: %v", name, err)
	}
	return o
}

// Store writes every fixture object into s, with the tree all the commits
// have (tree/), and returns each object's hash by name. A repository made
// with go-git's PlainInit, given these objects and refs to them, is one
// git made.
func Store(t testing.TB, s storer.EncodedObjectStorer) map[string]plumbing.Hash {
	t.Helper()
	set := func(o plumbing.EncodedObject) plumbing.Hash {
		h, err := s.SetEncodedObject(o)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	files, err := os.ReadDir(Path("tree"))
	if err != nil {
		t.Fatal(err)
	}
	var tree object.Tree
	for _, f := range files {
		tree.Entries = append(tree.Entries, object.TreeEntry{
			Name: f.Name(), Mode: filemode.Regular, Hash: set(encoded(plumbing.BlobObject, Read(t, "tree", f.Name()))),
		})
	}
	treeObj := s.NewEncodedObject()
	if err := tree.Encode(treeObj); err != nil {
		t.Fatal(err)
	}
	treeHash := set(treeObj)
	hashes := map[string]plumbing.Hash{}
	for _, name := range Names(t) {
		o := raw(t, name)
		if c, ok := Object(t, name).(*object.Commit); ok && c.TreeHash != treeHash {
			t.Fatalf("sigtest: commit %s has tree %s, but tree/ is %s: run testdata/generate.sh", name, c.TreeHash, treeHash)
		}
		hashes[name] = set(o)
	}
	return hashes
}

// KeyID is how an *signature.Error names the key of file keys/name: an
// OpenPGP key's id in upper-case hex (pgp-*.asc), an SSH key's SHA256
// fingerprint (ssh-*.pub).
func KeyID(t testing.TB, name string) string {
	t.Helper()
	b := Read(t, "keys", name)
	if strings.HasSuffix(name, ".pub") {
		pub, _, _, _, err := ssh.ParseAuthorizedKey(b)
		if err != nil {
			t.Fatalf("sigtest: keys/%s: %v", name, err)
		}
		return ssh.FingerprintSHA256(pub)
	}
	el, err := openpgp.ReadArmoredKeyRing(bytes.NewReader(b))
	if err != nil || len(el) != 1 {
		t.Fatalf("sigtest: keys/%s: %d keys, %v", name, len(el), err)
	}
	return fmt.Sprintf("%016X", el[0].PrimaryKey.KeyId)
}

// AllowedSigner is the allowed-signers line that trusts the SSH key of
// keys/name (ssh-*.pub) for principal.
func AllowedSigner(t testing.TB, principal, name string) string {
	t.Helper()
	return principal + " " + strings.TrimSpace(string(Read(t, "keys", name))) + "\n"
}
