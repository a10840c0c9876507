package registry

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"sigs.k8s.io/yaml"

	"recond.dev/recond/internal/testenv/tools"
)

// The media types of the artifacts the test registry pushes.
const (
	// FluxConfigMediaType is the config media type of `flux push artifact`.
	FluxConfigMediaType = "application/vnd.cncf.flux.config.v1+json"
	// FluxContentMediaType is the layer media type of `flux push artifact`.
	FluxContentMediaType = "application/vnd.cncf.flux.content.v1.tar+gzip"
	// PlainArtifactType is the artifactType of PushPlain's OCI 1.1 artifact.
	PlainArtifactType = "application/vnd.recond.manifests.v1"
	// HelmConfigMediaType is the config media type of `helm push`.
	HelmConfigMediaType = "application/vnd.cncf.helm.config.v1+json"
	// HelmChartMediaType is the chart layer media type of `helm push`.
	HelmChartMediaType = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
)

// Manifest is an OCI image manifest for Push, any content allowed.
type Manifest struct {
	// MediaType is the manifest's media type, and the Content-Type it is
	// pushed with; "" for application/vnd.oci.image.manifest.v1+json.
	MediaType string
	// ArtifactType is the manifest's artifactType ("" for none).
	ArtifactType string
	// ConfigMediaType is the config descriptor's media type; "" for
	// application/vnd.oci.empty.v1+json.
	ConfigMediaType string
	// Config is the config blob; nil for "{}".
	Config []byte
	// Layers are pushed as blobs and listed in order.
	Layers []Layer
	// Annotations are the manifest's annotations.
	Annotations map[string]string
}

// Layer is one layer of a Manifest.
type Layer struct {
	// MediaType is the layer descriptor's media type.
	MediaType string
	// Data is pushed as a blob (unless nil).
	Data []byte
	// Digest, when set, is what the manifest declares instead of Data's
	// digest: a lie. Distribution 2.8 refuses a manifest whose blobs it
	// does not have, so it must name a blob the registry has (another
	// layer's); to serve a blob whose content does not match its digest,
	// damage it through BlobPath after the push.
	Digest string
	// Size, when not 0, is what the manifest declares instead of Data's
	// length (distribution does not check it).
	Size int64
	// Annotations are the layer descriptor's annotations.
	Annotations map[string]string
}

// Push pushes m to repo and tags it tag ("" pushes by digest only), with
// oras-go as the first user; it returns the manifest's digest.
func (r *Registry) Push(t testing.TB, repo, tag string, m Manifest) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep := r.Repository(t, repo)
	pushBlob := func(mediaType string, data []byte) ocispec.Descriptor {
		desc := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(data), Size: int64(len(data))}
		if err := rep.Blobs().Push(ctx, desc, bytes.NewReader(data)); err != nil {
			t.Fatalf("push a %s blob of %d bytes to %s: %v", mediaType, len(data), repo, err)
		}
		return desc
	}
	if m.MediaType == "" {
		m.MediaType = ocispec.MediaTypeImageManifest
	}
	if m.ConfigMediaType == "" {
		m.ConfigMediaType = ocispec.MediaTypeEmptyJSON
	}
	if m.Config == nil {
		m.Config = []byte("{}")
	}
	man := ocispec.Manifest{
		Versioned:    specs.Versioned{SchemaVersion: 2},
		MediaType:    m.MediaType,
		ArtifactType: m.ArtifactType,
		Config:       pushBlob(m.ConfigMediaType, m.Config),
		Layers:       []ocispec.Descriptor{},
		Annotations:  m.Annotations,
	}
	for i, l := range m.Layers {
		desc := ocispec.Descriptor{MediaType: l.MediaType, Digest: digest.FromBytes(l.Data), Size: int64(len(l.Data))}
		if l.Data != nil {
			desc = pushBlob(l.MediaType, l.Data)
		}
		if l.Digest != "" {
			d, err := digest.Parse(l.Digest)
			if err != nil {
				t.Fatalf("layer %d of the manifest for %s: %v", i, repo, err)
			}
			desc.Digest = d
		}
		if l.Size != 0 {
			desc.Size = l.Size
		}
		desc.Annotations = l.Annotations
		man.Layers = append(man.Layers, desc)
	}
	body, err := json.Marshal(man)
	if err != nil {
		t.Fatal(err)
	}
	desc := ocispec.Descriptor{MediaType: m.MediaType, Digest: digest.FromBytes(body), Size: int64(len(body))}
	if tag == "" {
		err = rep.Manifests().Push(ctx, desc, bytes.NewReader(body))
	} else {
		err = rep.Manifests().PushReference(ctx, desc, bytes.NewReader(body), tag)
	}
	if err != nil {
		t.Fatalf("push the manifest %s to %s:%s: %v", desc.Digest, repo, tag, err)
	}
	return desc.Digest.String()
}

// PushFluxArtifact pushes files as `flux push artifact` does: config
// application/vnd.cncf.flux.config.v1+json holding "{}", one layer
// application/vnd.cncf.flux.content.v1.tar+gzip of the files (FilesTarGz),
// and the annotations created (now), source
// (https://example.com/REPO.git) and revision (main@sha1:SHA1 of the
// layer). It returns the manifest's digest.
func (r *Registry) PushFluxArtifact(t testing.TB, repo, tag string, files map[string]string) string {
	t.Helper()
	layer := FilesTarGz(t, files)
	sum := sha1.Sum(layer)
	return r.Push(t, repo, tag, Manifest{
		ConfigMediaType: FluxConfigMediaType,
		Config:          []byte("{}"),
		Layers:          []Layer{{MediaType: FluxContentMediaType, Data: layer}},
		Annotations: map[string]string{
			ocispec.AnnotationCreated:  time.Now().UTC().Format(time.RFC3339),
			ocispec.AnnotationSource:   "https://example.com/" + repo + ".git",
			ocispec.AnnotationRevision: "main@sha1:" + hex.EncodeToString(sum[:]),
		},
	})
}

// PushPlain pushes files as an OCI 1.1 artifact: artifactType
// PlainArtifactType, the empty config (application/vnd.oci.empty.v1+json,
// "{}") and one application/vnd.oci.image.layer.v1.tar+gzip layer of the
// files (FilesTarGz). It returns the manifest's digest.
func (r *Registry) PushPlain(t testing.TB, repo, tag string, files map[string]string) string {
	t.Helper()
	return r.Push(t, repo, tag, Manifest{
		ArtifactType:    PlainArtifactType,
		ConfigMediaType: ocispec.MediaTypeEmptyJSON,
		Config:          []byte("{}"),
		Layers:          []Layer{{MediaType: ocispec.MediaTypeImageLayerGzip, Data: FilesTarGz(t, files)}},
		Annotations:     map[string]string{ocispec.AnnotationCreated: time.Now().UTC().Format(time.RFC3339)},
	})
}

// pushedDigest finds the digest `helm push` reports.
var pushedDigest = regexp.MustCompile(`(?m)^Digest: (sha256:[0-9a-f]{64})\s*$`)

// PushChart pushes the chart chartFiles (paths relative to the chart's
// root: "Chart.yaml", "templates/x.yaml", ...) as `helm package` and `helm
// push CHART.tgz oci://HOST/PARENT` made it, PARENT being repo without its
// last element, which must be the chart's name: the manifest is exactly
// what helm made, tagged with the chart's version ('+' made '_', helm's
// rule). It returns the manifest's digest.
//
// What helm pushed is read from testdata/helm-push/NAME-VERSION of the
// calling test's package: an OCI image layout (Save) and the digest of the
// chart files it was made from; a layout made from other files fails the
// test. With RECOND_UPDATE_FIXTURES=1 (make fixtures), helm ($HELM_BIN)
// packages and pushes the chart, and the layout is written again.
func (r *Registry) PushChart(t testing.TB, repo string, chartFiles map[string]string) string {
	t.Helper()
	var meta struct{ Name, Version string }
	if err := yaml.Unmarshal([]byte(chartFiles["Chart.yaml"]), &meta); err != nil || meta.Name == "" {
		t.Fatalf("push chart to %s: Chart.yaml has no name (%v)", repo, err)
	}
	parent, name := path.Split(repo)
	if name != meta.Name {
		t.Fatalf("push chart %q to %s: helm pushes a chart to PARENT/NAME, so the repository's last element must be the chart's name", meta.Name, repo)
	}
	fixture := filepath.Join("testdata", "helm-push", meta.Name+"-"+meta.Version)
	madeFrom := fixtureDigest(chartFiles)
	if !tools.UpdateFixtures() {
		got, err := os.ReadFile(filepath.Join(fixture, "chart-files.digest"))
		if err != nil {
			t.Fatalf("no helm push of this chart (%v): make fixtures writes it", err)
		}
		if strings.TrimSpace(string(got)) != madeFrom {
			t.Fatalf("%s was made from other chart files than the test pushes: make fixtures writes it again", fixture)
		}
		return r.Load(t, repo, filepath.Join(fixture, "oci"))[HelmTag(meta.Version)]
	}
	d := r.helmPush(t, tools.FixtureTool(t, tools.Helm), parent, meta.Name, meta.Version, chartFiles)
	r.Save(t, repo, filepath.Join(fixture, "oci"), HelmTag(meta.Version))
	if err := os.WriteFile(filepath.Join(fixture, "chart-files.digest"), []byte(madeFrom+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return d
}

// helmPush packages the chart (name, version, files) with `helm package`
// and pushes it with `helm push` (bin) to oci://HOST/PARENT, returning the
// digest helm reports.
func (r *Registry) helmPush(t testing.TB, bin, parent, name, version string, chartFiles map[string]string) string {
	t.Helper()
	meta := struct{ Name, Version string }{name, version}
	dir := t.TempDir()
	chartDir := filepath.Join(dir, "chart", meta.Name)
	for p, content := range chartFiles {
		full := filepath.Join(chartDir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	regConfig := filepath.Join(dir, "registry.json")
	if r.user != "" {
		regConfig = r.DockerConfig(t, r.user, r.pass)
	} else if err := os.WriteFile(regConfig, []byte(`{"auths":{}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	helm := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append(args, "--registry-config", regConfig)...)
		cmd.Dir = dir
		home := filepath.Join(dir, "home")
		cmd.Env = []string{
			"PATH=" + os.Getenv("PATH"),
			"HOME=" + home,
			"TMPDIR=" + dir,
			"HELM_CACHE_HOME=" + filepath.Join(home, "cache"),
			"HELM_CONFIG_HOME=" + filepath.Join(home, "config"),
			"HELM_DATA_HOME=" + filepath.Join(home, "data"),
			"DOCKER_CONFIG=" + filepath.Join(home, "docker"),
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	helm("package", chartDir, "--destination", dir)
	tgz := filepath.Join(dir, meta.Name+"-"+meta.Version+".tgz")
	remote := "oci://" + strings.TrimSuffix(r.Host+"/"+parent, "/")
	args := []string{"push", tgz, remote}
	if r.opts.TLS {
		args = append(args, "--ca-file", r.CAFile)
	} else {
		args = append(args, "--plain-http")
	}
	out := helm(args...)
	m := pushedDigest.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("helm push %s %s reported no digest:\n%s", tgz, remote, out)
	}
	return m[1]
}

// HelmTag is the tag `helm push` gives a chart version: '+' is not allowed
// in a tag, and helm writes it '_'.
func HelmTag(version string) string { return strings.ReplaceAll(version, "+", "_") }

// TarEntry is one entry of a tar archive for TarGz: any name (absolute,
// with "..", duplicated), any type, any link target.
type TarEntry struct {
	// Name is the entry's name, as is.
	Name string
	// Body is the content written after the header; its length is the
	// header's size.
	Body string
	// Typeflag is the entry's type (tar.TypeReg, tar.TypeDir,
	// tar.TypeSymlink, tar.TypeLink, ...); 0 for a regular file.
	Typeflag byte
	// Linkname is the target of a link.
	Linkname string
	// Mode is the permission bits; 0 for 0o644 (0o755 for a directory).
	Mode int64
}

// TarGz builds a gzip-compressed tar archive of entries, in order, with
// nothing checked or cleaned: for hostile archives too. Times are fixed,
// so the same entries make the same bytes.
func TarGz(t testing.TB, entries ...TarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	mtime := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, e := range entries {
		h := &tar.Header{
			Name:     e.Name,
			Typeflag: e.Typeflag,
			Linkname: e.Linkname,
			Mode:     e.Mode,
			Size:     int64(len(e.Body)),
			ModTime:  mtime,
		}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Mode == 0 {
			h.Mode = 0o644
			if h.Typeflag == tar.TypeDir {
				h.Mode = 0o755
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatalf("tar entry %q: %v", e.Name, err)
		}
		if _, err := tw.Write([]byte(e.Body)); err != nil {
			t.Fatalf("tar entry %q: %v", e.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatalf("close the tar archive: %v", err)
	}
	if err := gz.Close(); err != nil {
		t.Fatalf("close the gzip stream: %v", err)
	}
	return buf.Bytes()
}

// FilesTarGz is TarGz of files (path -> content) as regular files, sorted
// by path, their directories implied (no directory entries).
func FilesTarGz(t testing.TB, files map[string]string) []byte {
	t.Helper()
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	entries := make([]TarEntry, 0, len(names))
	for _, name := range names {
		entries = append(entries, TarEntry{Name: name, Body: files[name]})
	}
	return TarGz(t, entries...)
}
