package oci

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"unicode/utf8"

	"recond.dev/recond/reconcile/source/manifest"
	"recond.dev/recond/reconcile/source/tree"
)

// An artifact's layer (a tar+gzip) becomes a tree of files in memory
// (a tree.Mem), behind tree.Dir and tree.File like a Git commit's tree, so
// that every renderer reads it under the same bounds and link rules. The
// layer is untrusted: what it may not hold is refused while it is read,
// naming the entry, before anything is rendered.

// The longest entry name and the deepest entry a layer may hold: a path
// longer than Linux's PATH_MAX, or deeper than any manifest tree, is not
// one to manifest.
const (
	maxEntryName  = 4096
	maxEntryDepth = 64
)

// layerError is an entry of a layer that recond refuses: reason invalid,
// naming the entry.
func layerError(entry, format string, args ...any) error {
	return &manifest.ManifestError{File: "layer entry " + entry, Err: fmt.Errorf(format, args...)}
}

// unpackLayer reads a tar+gzip layer into memory and checks that what
// was read is the blob of digest (a "sha256:..." the manifest named): a
// cached blob that no longer is fails as the cache's fault (an
// *manifest.ReadError), so the next fetch pulls it again.
//
// Refused, each naming the entry: a path that is absolute or climbs with
// "..", a hard link, a device, FIFO or any type but a file, a directory
// or a symbolic link, a symbolic link whose target is absolute or leaves
// the tree, an entry given twice, a file larger than MaxFileBytes, more
// than MaxFiles entries, and more than MaxBytes of uncompressed data (the
// tar's headers included).
func unpackLayer(blob io.Reader, digest string, lim manifest.Limits) (*tree.Mem, error) {
	want, ok := strings.CutPrefix(digest, "sha256:")
	if !ok {
		return nil, fmt.Errorf("layer digest %q is not sha256", digest)
	}
	h := sha256.New()
	src := io.TeeReader(blob, h)
	zr, err := gzip.NewReader(src)
	if err != nil {
		return nil, checkBlob(src, h, want, layerError("(gzip)", "not a gzip stream: %v", err))
	}
	zr.Multistream(false)
	plain := &countingReader{r: zr, max: lim.MaxBytes}
	root := tree.NewMem()
	files := 0
	tr := tar.NewReader(plain)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, checkBlob(src, h, want, plain.limitOr(layerError("(tar)", "%v", err)))
		}
		if files++; files > lim.MaxFiles {
			return nil, manifest.NewLimitError(manifest.LimitFiles, int64(files), int64(lim.MaxFiles), "layer entry "+hdr.Name)
		}
		if err := addEntry(root, tr, hdr, lim, &files); err != nil {
			return nil, checkBlob(src, h, want, plain.limitOr(err))
		}
	}
	return root, checkBlob(src, h, want, nil)
}

// checkBlob reads what is left of the blob and compares its digest: a
// blob that is not the one the manifest named is the cache's fault, which
// wins over what its content made fail (err).
func checkBlob(src io.Reader, h interface{ Sum([]byte) []byte }, want string, err error) error {
	if _, cerr := io.Copy(io.Discard, src); cerr != nil {
		return &manifest.ReadError{Err: fmt.Errorf("read the cached layer: %w", cerr)}
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return &manifest.ReadError{Err: fmt.Errorf("the cached layer is damaged: its digest is sha256:%s, not sha256:%s", got[:12], want[:12])}
	}
	return err
}

// countingReader fails once more than max bytes were read.
type countingReader struct {
	r        io.Reader
	n, max   int64
	exceeded bool
}

var errUncompressed = errors.New("uncompressed layer over --render-max-bytes")

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.n > c.max {
		c.exceeded = true
		return n, errUncompressed
	}
	return n, err
}

// limitOr is the bytes limit, when that is why reading stopped, or err.
func (c *countingReader) limitOr(err error) error {
	if c.exceeded {
		return manifest.NewLimitError(manifest.LimitBytes, c.n, c.max, "layer (uncompressed)")
	}
	return err
}

// addEntry checks one tar entry and adds it to root.
func addEntry(root *tree.Mem, tr *tar.Reader, hdr *tar.Header, lim manifest.Limits, files *int) error {
	name := hdr.Name
	if len(name) > maxEntryName {
		return layerError(name[:64]+"...", "a name of %d bytes, longer than a path (%d)", len(name), maxEntryName)
	}
	if !utf8.ValidString(name) || strings.ContainsRune(name, 0) {
		return layerError(fmt.Sprintf("%q", name), "the name is not UTF-8 text")
	}
	clean, err := entryPath(name)
	if err != nil {
		return layerError(name, "%v", err)
	}
	switch hdr.Typeflag {
	case tar.TypeReg, tar.TypeRegA, tar.TypeDir, tar.TypeSymlink:
	case tar.TypeXGlobalHeader:
		return nil // pax defaults for the entries after it (git archive writes one): no file
	case tar.TypeLink:
		return layerError(name, "a hard link (to %s): refused", hdr.Linkname)
	case tar.TypeChar, tar.TypeBlock:
		return layerError(name, "a device file: refused")
	case tar.TypeFifo:
		return layerError(name, "a FIFO: refused")
	default:
		return layerError(name, "an entry of tar type %q: only files, directories and symbolic links are read", hdr.Typeflag)
	}
	if clean == "." {
		if hdr.Typeflag == tar.TypeDir {
			return nil // "./"
		}
		return layerError(name, "not a path inside the artifact")
	}
	if depth := strings.Count(clean, "/") + 1; depth > maxEntryDepth {
		return layerError(name, "%d directories deep, more than %d", depth, maxEntryDepth)
	}
	parent, base, err := mkdirs(root, clean, func() error {
		// A directory the entry implies counts as an entry of its own.
		if *files++; *files > lim.MaxFiles {
			return manifest.NewLimitError(manifest.LimitFiles, int64(*files), int64(lim.MaxFiles), "layer entry "+name)
		}
		return nil
	})
	if err != nil {
		var me *manifest.ManifestError
		if errors.As(err, &me) {
			return err
		}
		return layerError(name, "%v", err)
	}
	if old, ok := parent.Lookup(base); ok {
		if hdr.Typeflag == tar.TypeDir && old.Kind == tree.KindDir {
			return nil // a directory named again, as tar does for parents
		}
		return layerError(name, "given twice in the layer")
	}
	n := &tree.MemEntry{}
	switch hdr.Typeflag {
	case tar.TypeDir:
		n.Kind, n.Dir = tree.KindDir, tree.NewMem()
	case tar.TypeSymlink:
		t := hdr.Linkname
		if path.IsAbs(t) || len(t) == 0 || len(t) > tree.MaxLinkTarget {
			return layerError(name, "a symbolic link to %q leaves the artifact", t)
		}
		if j := path.Join(path.Dir(clean), t); j == ".." || strings.HasPrefix(j, "../") {
			return layerError(name, "a symbolic link to %q leaves the artifact", t)
		}
		n.Kind, n.Data = tree.KindSymlink, []byte(t)
	default:
		if hdr.Size > lim.MaxFileBytes {
			return manifest.NewLimitError(manifest.LimitFileBytes, hdr.Size, lim.MaxFileBytes, "layer entry "+name)
		}
		data := make([]byte, hdr.Size)
		if _, err := io.ReadFull(tr, data); err != nil {
			return layerError(name, "%v", err)
		}
		n.Kind, n.Data = tree.KindFile, data
	}
	parent.Add(base, n)
	return nil
}

// entryPath cleans a tar entry's name ("./a/b/" is "a/b"), refusing one
// that is absolute or climbs.
func entryPath(name string) (string, error) {
	if name == "" {
		return "", errors.New("an empty name")
	}
	if path.IsAbs(name) {
		return "", errors.New("an absolute path: refused")
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return "", errors.New("a path that climbs with \"..\": refused")
		}
	}
	return path.Clean(name), nil
}

// mkdirs returns the directory that holds p, making the directories on
// the way (each after made agrees); a file or link on the way is an
// error.
func mkdirs(root *tree.Mem, p string, made func() error) (*tree.Mem, string, error) {
	parts := strings.Split(p, "/")
	d := root
	for i, part := range parts[:len(parts)-1] {
		n, ok := d.Lookup(part)
		if !ok {
			if err := made(); err != nil {
				return nil, "", err
			}
			n = &tree.MemEntry{Kind: tree.KindDir, Dir: tree.NewMem()}
			d.Add(part, n)
		}
		if n.Kind != tree.KindDir {
			return nil, "", fmt.Errorf("%s is not a directory", strings.Join(parts[:i+1], "/"))
		}
		d = n.Dir
	}
	return d, parts[len(parts)-1], nil
}
