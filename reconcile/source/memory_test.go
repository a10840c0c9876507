package source

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	gitsrc "recond.dev/recond/reconcile/source/git"
	"recond.dev/recond/reconcile/source/render"
)

// bigBlob is the size of the blob the tests of this file refuse: far over
// every limit they set, and over the bound on what a render may allocate.
const bigBlob = 24 << 20

// bigConfigMap is a ConfigMap of about size bytes that does not compress.
func bigConfigMap(name string, size int) string {
	raw := make([]byte, size/2)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range raw {
		raw[i] = byte(r.Uint32())
	}
	return cm(name) + "data:\n  blob: " + hex.EncodeToString(raw) + "\n"
}

// TestRenderRefusesLargeFilesUnread renders commits whose files are far
// over the limits and checks that the refusal costs memory in proportion
// to the limits, not to the commit: no blob is read (or even inflated by
// go-git on lookup) before its size has passed MaxFileBytes and what is
// left of MaxBytes, and files that are not manifests are never read.
func TestRenderRefusesLargeFilesUnread(t *testing.T) {
	big := bigConfigMap("big", bigBlob)
	files := map[string]string{
		"file/big.yaml":                big,
		"budget/a.yaml":                cm("a"),
		"budget/b.yaml":                big,
		"kfile/kustomization.yaml":     kust("big.yaml"),
		"kfile/big.yaml":               big,
		"kbudget/kustomization.yaml":   kust("a.yaml", "b.yaml"),
		"kbudget/a.yaml":               cm("a"),
		"kbudget/b.yaml":               big,
		"other/cm.yaml":                cm("small"),
		"other/data/image.bin":         big,
		"other/data/image-copy.bin":    big + "x",
		"other/.git-crypt/huge.yaml":   big + "y",
		"other/vendor/notes/readme.md": big + "z",
	}
	// Many files just under the size go-git streams (gitsrc.LargeObject), none a
	// manifest: looked up whole, they would add up to more than the bound.
	part := bigConfigMap("part", gitsrc.LargeObject-1024)
	for i := range 64 {
		files[fmt.Sprintf("other/data/part-%02d.bin", i)] = fmt.Sprintf("%02d%s", i, part)
	}
	dir := t.TempDir()
	r := newTestRepo(t, dir)
	sha := r.commit(files)
	link := r.symlinkCommit(sha, "link/cm.yaml", strings.Repeat("a/", bigBlob/2))
	files, big, part = nil, "", ""

	// What a refused render may allocate in all: generous, far below the
	// blob, whose size alone would exceed it.
	lim := Limits{MaxBytes: 2 << 20, MaxFileBytes: 1 << 20}
	bound := 4 * uint64(lim.MaxBytes)
	tests := []struct {
		path, sha string
		lim       Limits
		want      string // the limit, or "" for a render that succeeds
	}{
		{"file", sha, lim, LimitFileBytes},
		{"budget", sha, Limits{MaxBytes: lim.MaxBytes, MaxFileBytes: 2 * bigBlob}, LimitBytes},
		{"kfile", sha, lim, LimitFileBytes},
		{"kbudget", sha, Limits{MaxBytes: lim.MaxBytes, MaxFileBytes: 2 * bigBlob}, LimitBytes},
		{"other", sha, lim, ""},
		{"link", link, lim, "symlink"},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			s := mustNew(t, Config{URL: dir, Path: tc.path, Limits: tc.lim})
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			ms, err := s.Render(context.Background(), tc.sha)
			runtime.ReadMemStats(&after)
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("allocated %d KiB; err=%v", alloc>>10, err)
			if alloc > bound {
				t.Errorf("render allocated %d KiB, want at most %d KiB (4 x --render-max-bytes); a %d KiB blob was read",
					alloc>>10, bound>>10, bigBlob>>10)
			}
			var le *LimitError
			switch {
			case tc.want == "":
				if err != nil || len(ms) != 1 {
					t.Errorf("Render() = %d objects, %v; want 1 object", len(ms), err)
				}
			case tc.want == "symlink":
				if err == nil || !strings.Contains(err.Error(), "longer than a path") {
					t.Errorf("Render() error = %v, want a symlink target longer than a path", err)
				}
			case !errors.As(err, &le) || le.Limit != tc.want:
				t.Errorf("Render() error = %v, want the %s limit", err, tc.want)
			}
		})
	}
}

// symlinkCommit makes a commit on top of parent (not checked out) whose
// tree holds only a symbolic link at name (one directory deep) to target:
// a link no file system would hold, as a hostile repository may.
func (r *testRepo) symlinkCommit(parent, name, target string) string {
	r.t.Helper()
	st := r.repo.Storer
	put := func(o interface {
		Encode(plumbing.EncodedObject) error
	}) plumbing.Hash {
		obj := st.NewEncodedObject()
		if err := o.Encode(obj); err != nil {
			r.t.Fatal(err)
		}
		h, err := st.SetEncodedObject(obj)
		if err != nil {
			r.t.Fatal(err)
		}
		return h
	}
	blob := st.NewEncodedObject()
	blob.SetType(plumbing.BlobObject)
	w, err := blob.Writer()
	if err != nil {
		r.t.Fatal(err)
	}
	if _, err := w.Write([]byte(target)); err != nil {
		r.t.Fatal(err)
	}
	w.Close()
	bh, err := st.SetEncodedObject(blob)
	if err != nil {
		r.t.Fatal(err)
	}
	d, f, ok := strings.Cut(name, "/")
	if !ok {
		r.t.Fatalf("symlinkCommit: %s is not one directory deep", name)
	}
	sub := put(&object.Tree{Entries: []object.TreeEntry{{Name: f, Mode: filemode.Symlink, Hash: bh}}})
	root := put(&object.Tree{Entries: []object.TreeEntry{{Name: d, Mode: filemode.Dir, Hash: sub}}})
	sig := object.Signature{Name: "Test", Email: "test@example.com", When: time.Unix(1_700_000_000, 0)}
	c := put(&object.Commit{Author: sig, Committer: sig, Message: fmt.Sprintf("link %s", name),
		TreeHash: root, ParentHashes: []plumbing.Hash{plumbing.NewHash(parent)}})
	return c.String()
}

// TestReadFileRefusesAnObjectLongerThanItsSize: an object whose size field
// says less than its content (a damaged pack) is a read error, never a
// file cut short at that size (which could decode to fewer objects).
func TestReadFileRefusesAnObjectLongerThanItsSize(t *testing.T) {
	content := []byte(cm("a") + "---\n" + cm("b"))
	o := &plumbing.MemoryObject{}
	o.SetType(plumbing.BlobObject)
	if _, err := o.Write(content); err != nil {
		t.Fatal(err)
	}
	o.SetSize(int64(len(content) / 2)) // the header lies
	blob, err := object.DecodeBlob(o)
	if err != nil {
		t.Fatal(err)
	}
	b := render.NewBudget(DefaultLimits)
	data, err := b.ReadFile("a.yaml", gitsrc.File(object.NewFile("a.yaml", filemode.Regular, blob)))
	var ore *render.ReadError
	if err == nil || !errors.As(err, &ore) {
		t.Fatalf("readFile = %q, %v; want a read error", data, err)
	}
}
