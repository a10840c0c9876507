package oci

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"path"
	"strings"
	"testing"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/reconcile/source/manifest"
	"recond.dev/recond/reconcile/source/tree"
)

func digestOfBytes(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// TestUnpackLayerRefusals: every entry a layer may not hold is refused
// while it is read, naming the entry, with reason invalid (a
// *ManifestError), and a layer within its bounds unpacks whole.
func TestUnpackLayerRefusals(t *testing.T) {
	small := manifest.Limits{MaxBytes: 64 << 10, MaxFileBytes: 4 << 10, MaxFiles: 8}.WithDefaults()
	file := func(name, body string) testenv.TarEntry { return testenv.TarEntry{Name: name, Body: body} }
	cases := []struct {
		name    string
		entries []testenv.TarEntry
		lim     manifest.Limits
		want    string // in the error; "" for none
		limit   string // the LimitError's limit, if one
	}{
		{"plain files", []testenv.TarEntry{file("./a.yaml", "a: 1"), file("dir/b.yaml", "b: 2"), {Name: "dir/", Typeflag: tar.TypeDir}}, small, "", ""},
		{"link inside", []testenv.TarEntry{file("dir/b.yaml", "b"), {Name: "c.yaml", Typeflag: tar.TypeSymlink, Linkname: "dir/b.yaml"}}, small, "", ""},
		{"dot dot", []testenv.TarEntry{file("a/../../etc/passwd", "x")}, small, `layer entry a/../../etc/passwd: a path that climbs with ".."`, ""},
		{"dot dot inside", []testenv.TarEntry{file("a/../b.yaml", "x")}, small, `layer entry a/../b.yaml: a path that climbs`, ""},
		{"absolute", []testenv.TarEntry{file("/etc/passwd", "x")}, small, "layer entry /etc/passwd: an absolute path", ""},
		{"hard link", []testenv.TarEntry{file("a.yaml", "x"), {Name: "b.yaml", Typeflag: tar.TypeLink, Linkname: "a.yaml"}}, small, "layer entry b.yaml: a hard link", ""},
		{"char device", []testenv.TarEntry{{Name: "zero", Typeflag: tar.TypeChar}}, small, "layer entry zero: a device file", ""},
		{"block device", []testenv.TarEntry{{Name: "sda", Typeflag: tar.TypeBlock}}, small, "layer entry sda: a device file", ""},
		{"fifo", []testenv.TarEntry{{Name: "pipe", Typeflag: tar.TypeFifo}}, small, "layer entry pipe: a FIFO", ""},
		{"link absolute", []testenv.TarEntry{{Name: "l.yaml", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}}, small, `layer entry l.yaml: a symbolic link to "/etc/passwd" leaves the artifact`, ""},
		{"link climbs", []testenv.TarEntry{{Name: "d/l.yaml", Typeflag: tar.TypeSymlink, Linkname: "../../x"}}, small, `layer entry d/l.yaml: a symbolic link to "../../x" leaves`, ""},
		{"twice", []testenv.TarEntry{file("a.yaml", "x"), file("./a.yaml", "y")}, small, "layer entry ./a.yaml: given twice", ""},
		{"through a link", []testenv.TarEntry{{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "d"}, file("l/x.yaml", "x")}, small, "layer entry l/x.yaml: l is not a directory", ""},
		{"file too large", []testenv.TarEntry{file("big.yaml", strings.Repeat("x", 5<<10))}, small, "layer entry big.yaml", manifest.LimitFileBytes},
		{"too many entries", []testenv.TarEntry{file("1", ""), file("2", ""), file("3", ""), file("4", ""), file("5", ""), file("6", ""), file("7", ""), file("8", ""), file("9", "")}, small, "layer entry 9", manifest.LimitFiles},
		{"too long a name", []testenv.TarEntry{file(strings.Repeat("n", 5000), "x")}, small, "longer than a path", ""},
		{"too deep", []testenv.TarEntry{file(strings.Repeat("d/", 70)+"x.yaml", "x")}, small, "directories deep", ""},
		{"implied directories count", []testenv.TarEntry{file("a/b/c/d/e/f/g/h/i.yaml", "x")}, small, "layer entry a/b/c/d/e/f/g/h/i.yaml", manifest.LimitFiles},
		{"gzip bomb", func() []testenv.TarEntry {
			var es []testenv.TarEntry
			for i := range 8 {
				es = append(es, file(string(rune('a'+i)), strings.Repeat("0", 4<<10)))
			}
			return es
		}(), manifest.Limits{MaxBytes: 16 << 10, MaxFileBytes: 8 << 10, MaxFiles: 100}.WithDefaults(), "layer (uncompressed)", manifest.LimitBytes},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			blob := testenv.TarGz(t, tc.entries...)
			layer, err := unpackLayer(bytes.NewReader(blob), digestOfBytes(blob), tc.lim)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unpack: %v", err)
				}
				if len(layer.Entries()) == 0 {
					t.Fatal("unpacked nothing")
				}
				return
			}
			if err == nil {
				t.Fatalf("unpacked; want an error with %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to contain %q", err, tc.want)
			}
			var me *manifest.ManifestError
			if !errors.As(err, &me) {
				t.Errorf("error %T is not a *ManifestError (reason invalid)", err)
			}
			var le *manifest.LimitError
			if tc.limit != "" && (!errors.As(err, &le) || le.Limit != tc.limit) {
				t.Errorf("error %v: want the %s limit", err, tc.limit)
			}
		})
	}
}

// TestUnpackLayerDigest: a layer that is not the blob its digest names
// (a damaged cache) is the cache's fault, whatever its content does.
func TestUnpackLayerDigest(t *testing.T) {
	good := testenv.FilesTarGz(t, map[string]string{"a.yaml": "a: 1"})
	other := testenv.FilesTarGz(t, map[string]string{"a.yaml": "a: 2"})
	for name, blob := range map[string][]byte{
		"other layer":  other,
		"truncated":    good[:len(good)/2],
		"not gzip":     []byte("garbage"),
		"trailing":     append(bytes.Clone(good), 0),
		"hostile tree": testenv.TarGz(t, testenv.TarEntry{Name: "/etc/passwd", Body: "x"}),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := unpackLayer(bytes.NewReader(blob), digestOfBytes(good), manifest.DefaultLimits)
			var ore *manifest.ReadError
			if !errors.As(err, &ore) {
				t.Fatalf("error %v (%T): want the cached layer's fault", err, err)
			}
		})
	}
	if _, err := unpackLayer(bytes.NewReader(good), digestOfBytes(good), manifest.DefaultLimits); err != nil {
		t.Fatal(err)
	}
}

// TestUnpackLayerShortEntry: an entry whose content ends before its
// header's size, in a blob that is the one its digest names, is the
// artifact's fault (reason invalid, naming the entry), not the cache's.
func TestUnpackLayerShortEntry(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	if err := tw.WriteHeader(&tar.Header{Name: "a.yaml", Size: 100, Mode: 0o644, Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	tw.Write([]byte("a: 1\n"))
	tw.Flush() // the tar stops here: 95 bytes of the entry are missing
	zw.Close()
	blob := buf.Bytes()
	_, err := unpackLayer(bytes.NewReader(blob), digestOfBytes(blob), manifest.DefaultLimits)
	var me *manifest.ManifestError
	var re *manifest.ReadError
	if !errors.As(err, &me) || errors.As(err, &re) || !strings.Contains(err.Error(), "layer entry a.yaml") {
		t.Fatalf("error %v (%T): want the artifact's fault naming a.yaml", err, err)
	}
}

// TestUnpackLayerPAXGlobalHeader: the pax global header git archive
// writes is no file, and no refusal.
func TestUnpackLayerPAXGlobalHeader(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeXGlobalHeader, Name: "pax_global_header", PAXRecords: map[string]string{"comment": "0123abcd"}}); err != nil {
		t.Fatal(err)
	}
	if err := tw.WriteHeader(&tar.Header{Name: "a.yaml", Size: 4, Mode: 0o644, Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	tw.Write([]byte("a: 1"))
	tw.Close()
	zw.Close()
	blob := buf.Bytes()
	layer, err := unpackLayer(bytes.NewReader(blob), digestOfBytes(blob), manifest.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if got := layer.Entries(); len(got) != 1 || got[0].Name != "a.yaml" {
		t.Fatalf("entries %v, want a.yaml alone", got)
	}
}

// TestUnpackLayerGzipMembers: the tar is the first gzip member only.
func TestUnpackLayerGzipMembers(t *testing.T) {
	var buf bytes.Buffer
	buf.Write(testenv.FilesTarGz(t, map[string]string{"a.yaml": "a: 1"}))
	zw := gzip.NewWriter(&buf)
	zw.Write(bytes.Repeat([]byte{0}, 1<<20))
	zw.Close()
	blob := buf.Bytes()
	layer, err := unpackLayer(bytes.NewReader(blob), digestOfBytes(blob), manifest.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(layer.Entries()); got != 1 {
		t.Fatalf("%d entries, want 1", got)
	}
}

// FuzzUnpackLayer: whatever a layer holds, unpacking it never panics, and
// a tree it accepts holds only names inside it (no "/", "." or ".."
// component) and links whose targets stay inside it.
func FuzzUnpackLayer(f *testing.F) {
	f.Add(testenv.FilesTarGz(f, map[string]string{"a.yaml": "a: 1", "d/b.yaml": "b: 2"}))
	f.Add(testenv.TarGz(f, testenv.TarEntry{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "d/../a"}, testenv.TarEntry{Name: "../x", Body: "x"}))
	f.Add([]byte{0x1f, 0x8b, 8, 0})
	lim := manifest.Limits{MaxBytes: 1 << 20, MaxFileBytes: 64 << 10, MaxFiles: 100}.WithDefaults()
	f.Fuzz(func(t *testing.T, blob []byte) {
		layer, err := unpackLayer(bytes.NewReader(blob), digestOfBytes(blob), lim)
		if err != nil {
			return
		}
		var walk func(d *tree.Mem, at string)
		walk = func(d *tree.Mem, at string) {
			for _, e := range d.Entries() {
				if e.Name == "" || e.Name == "." || e.Name == ".." || strings.Contains(e.Name, "/") {
					t.Fatalf("entry %q under %q", e.Name, at)
				}
				p := at + "/" + e.Name
				n, _ := d.Lookup(e.Name)
				switch n.Kind {
				case tree.KindDir:
					walk(n.Dir, p)
				case tree.KindSymlink:
					if j := path.Join(path.Dir(strings.TrimPrefix(p, "/")), string(n.Data)); path.IsAbs(string(n.Data)) || j == ".." || strings.HasPrefix(j, "../") {
						t.Fatalf("link %s -> %s leaves the tree", p, n.Data)
					}
				}
			}
		}
		walk(layer, "")
	})
}
