package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"

	"recond.dev/recond/internal/testenv/tools"
)

// What a tool wrote into a registry (`helm push`, `cosign sign`) is kept
// as an OCI image layout (oci-layout, index.json naming each tag with
// org.opencontainers.image.ref.name, blobs/sha256/): Save writes one from
// a repository, Load pushes one into a repository byte for byte, so that
// a test reads what the tool made without running it.

// Save writes the manifests that tags of repo name, and everything they
// reference (config, layers, an index's manifests, a subject), into an
// OCI image layout at dir, replacing what dir held. With no tags, every
// tag of the repository is saved.
func (r *Registry) Save(t testing.TB, repo, dir string, tags ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep := r.Repository(t, repo)
	if len(tags) == 0 {
		if err := rep.Tags(ctx, "", func(page []string) error { tags = append(tags, page...); return nil }); err != nil {
			t.Fatalf("save %s: tags: %v", repo, err)
		}
	}
	slices.Sort(tags)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "blobs", "sha256"), 0o755); err != nil {
		t.Fatal(err)
	}
	saved := map[digest.Digest]bool{}
	var save func(d ocispec.Descriptor)
	save = func(d ocispec.Descriptor) {
		if saved[d.Digest] {
			return
		}
		saved[d.Digest] = true
		var data []byte
		var err error
		if isManifest(d.MediaType) {
			data, err = content.FetchAll(ctx, rep.Manifests(), d)
		} else {
			data, err = content.FetchAll(ctx, rep.Blobs(), d)
		}
		if err != nil {
			t.Fatalf("save %s: fetch %s (%s): %v", repo, d.Digest, d.MediaType, err)
		}
		if err := os.WriteFile(filepath.Join(dir, "blobs", "sha256", d.Digest.Encoded()), data, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, c := range layoutChildren(t, d, data) {
			save(c)
		}
	}
	index := ocispec.Index{MediaType: ocispec.MediaTypeImageIndex, Manifests: []ocispec.Descriptor{}}
	index.SchemaVersion = 2
	for _, tag := range tags {
		d, err := rep.Resolve(ctx, tag)
		if err != nil {
			t.Fatalf("save %s:%s: %v", repo, tag, err)
		}
		save(d)
		index.Manifests = append(index.Manifests, ocispec.Descriptor{MediaType: d.MediaType, Digest: d.Digest, Size: d.Size,
			Annotations: map[string]string{ocispec.AnnotationRefName: tag}})
	}
	tools.WriteJSON(t, filepath.Join(dir, ocispec.ImageLayoutFile), ocispec.ImageLayout{Version: ocispec.ImageLayoutVersion})
	tools.WriteJSON(t, filepath.Join(dir, "index.json"), index)
}

// Load pushes the OCI image layout at dir (as Save writes it) into repo:
// every blob, then every manifest as it is, children before the index
// that lists them, and each tag the layout names. It returns the digest
// of each tag.
func (r *Registry) Load(t testing.TB, repo, dir string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep := r.Repository(t, repo)
	var index ocispec.Index
	tools.ReadJSON(t, filepath.Join(dir, "index.json"), &index)
	read := func(d ocispec.Descriptor) []byte {
		data, err := os.ReadFile(filepath.Join(dir, "blobs", d.Digest.Algorithm().String(), d.Digest.Encoded()))
		if err != nil {
			t.Fatalf("load %s: %v", dir, err)
		}
		if digest.FromBytes(data) != d.Digest {
			t.Fatalf("load %s: blob %s does not hold its digest", dir, d.Digest)
		}
		return data
	}
	pushed := map[digest.Digest]bool{}
	var push func(d ocispec.Descriptor, ref string)
	push = func(d ocispec.Descriptor, ref string) {
		if pushed[d.Digest] && ref == d.Digest.String() {
			return
		}
		data := read(d)
		if !isManifest(d.MediaType) {
			if !pushed[d.Digest] {
				if exists, err := rep.Blobs().Exists(ctx, d); err != nil || !exists {
					if err := rep.Blobs().Push(ctx, d, bytes.NewReader(data)); err != nil {
						t.Fatalf("load %s into %s: blob %s: %v", dir, repo, d.Digest, err)
					}
				}
			}
			pushed[d.Digest] = true
			return
		}
		for _, c := range layoutChildren(t, d, data) {
			if c.Digest != d.Digest {
				push(c, c.Digest.String())
			}
		}
		r.putManifest(t, ctx, rep, repo, ref, d.MediaType, data)
		pushed[d.Digest] = true
	}
	tags := map[string]string{}
	for _, d := range index.Manifests {
		tag := d.Annotations[ocispec.AnnotationRefName]
		if tag == "" {
			tag = d.Digest.String()
		}
		push(d, tag)
		tags[tag] = d.Digest.String()
	}
	return tags
}

// putManifest PUTs a manifest's bytes as they are (oras-go's manifest push
// would also write a referrers index for a manifest with a subject, which
// Load pushes from the layout instead).
func (r *Registry) putManifest(t testing.TB, ctx context.Context, rep *remote.Repository, repo, ref, mediaType string, data []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, r.URL()+"/v2/"+repo+"/manifests/"+ref, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", mediaType)
	resp, err := rep.Client.Do(req)
	if err != nil {
		t.Fatalf("put the manifest %s:%s: %v", repo, ref, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		t.Fatalf("put the manifest %s:%s: %s: %s", repo, ref, resp.Status, body)
	}
}

// The Docker manifest types, which a tool may still write.
const (
	dockerManifest     = "application/vnd.docker.distribution.manifest.v2+json"
	dockerManifestList = "application/vnd.docker.distribution.manifest.list.v2+json"
)

// isManifest says whether a descriptor's media type is a manifest's or an
// index's (pushed to /manifests/), not a blob's.
func isManifest(mediaType string) bool {
	switch mediaType {
	case ocispec.MediaTypeImageManifest, ocispec.MediaTypeImageIndex, dockerManifest, dockerManifestList:
		return true
	}
	return false
}

// layoutChildren is what a manifest (config, layers, subject) or an index
// (manifests) references; nothing for a blob.
func layoutChildren(t testing.TB, d ocispec.Descriptor, data []byte) []ocispec.Descriptor {
	t.Helper()
	switch d.MediaType {
	case ocispec.MediaTypeImageManifest, dockerManifest:
		var m ocispec.Manifest
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("manifest %s: %v", d.Digest, err)
		}
		out := append([]ocispec.Descriptor{m.Config}, m.Layers...)
		if m.Subject != nil {
			out = append(out, *m.Subject)
		}
		return out
	case ocispec.MediaTypeImageIndex, dockerManifestList:
		var i ocispec.Index
		if err := json.Unmarshal(data, &i); err != nil {
			t.Fatalf("index %s: %v", d.Digest, err)
		}
		return i.Manifests
	}
	return nil
}

// fixtureDigest is the SHA-256 of files (path -> content), as a fixture
// records what it was made from.
func fixtureDigest(files map[string]string) string {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	var b bytes.Buffer
	for _, n := range names {
		fmt.Fprintf(&b, "%s\x00%d\x00%s", n, len(files[n]), files[n])
	}
	return digest.FromBytes(b.Bytes()).String()
}
