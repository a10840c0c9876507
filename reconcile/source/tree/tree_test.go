package tree

import (
	"errors"
	"io/fs"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

// TestFSDir: a file system's files, directories and links, as Entries
// lists them and File reads them (a link's content is its target).
func TestFSDir(t *testing.T) {
	root := FSDir(fstest.MapFS{
		"m/a.yaml":    {Data: []byte("a: 1\n")},
		"m/sub/b.yml": {Data: []byte("b")},
		"m/link.yaml": {Data: []byte("sub/b.yml"), Mode: fs.ModeSymlink},
	})
	m, err := root.Dir("m")
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{{"a.yaml", KindFile}, {"link.yaml", KindSymlink}, {"sub", KindDir}}
	if d := cmp.Diff(want, m.Entries()); d != "" {
		t.Errorf("entries (-want +got):\n%s", d)
	}
	for name, content := range map[string]string{"a.yaml": "a: 1\n", "link.yaml": "sub/b.yml"} {
		f, err := m.File(name)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := ReadAll(f); err != nil || got != content {
			t.Errorf("%s: %q, %v; want %q", name, got, err, content)
		}
	}
	if _, err := m.Entry("none"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing entry: %v, want fs.ErrNotExist", err)
	}
	if _, err := m.Dir("a.yaml"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a file opened as a directory: %v, want fs.ErrNotExist", err)
	}
}

// TestMem: entries are listed sorted whatever order they were added in,
// and one added again replaces the first.
func TestMem(t *testing.T) {
	root := NewMem()
	sub := NewMem()
	sub.Add("c", &MemEntry{Kind: KindFile, Data: []byte("c")})
	root.Add("b", &MemEntry{Kind: KindSymlink, Data: []byte("d/c")})
	root.Add("d", &MemEntry{Kind: KindDir, Dir: sub})
	root.Add("a", &MemEntry{Kind: KindFile, Data: []byte("old")})
	root.Add("a", &MemEntry{Kind: KindFile, Data: []byte("new")})
	want := []Entry{{"a", KindFile}, {"b", KindSymlink}, {"d", KindDir}}
	if d := cmp.Diff(want, root.Entries()); d != "" {
		t.Errorf("entries (-want +got):\n%s", d)
	}
	f, err := root.File("a")
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := ReadAll(f); got != "new" || f.Size() != 3 {
		t.Errorf("a: %q (size %d), want the entry added last", got, f.Size())
	}
	d, err := root.Dir("d")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.File("c"); err != nil {
		t.Error(err)
	}
	if _, err := root.File("d"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a directory opened as a file: %v, want fs.ErrNotExist", err)
	}
	if e, ok := root.Lookup("b"); !ok || e.Kind != KindSymlink {
		t.Errorf("Lookup(b) = %v, %v", e, ok)
	}
}
