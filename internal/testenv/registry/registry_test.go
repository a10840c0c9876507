package registry

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/errcode"
)

var (
	registryFiles = map[string]string{
		"deploy/cm.yaml":      "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n",
		"kustomization.yaml":  "resources: [deploy/cm.yaml]\n",
		"deploy/nested/x.txt": "x\n",
	}
	registryChart = map[string]string{
		"Chart.yaml":          "apiVersion: v2\nname: demo\nversion: 0.1.0+build.7\n",
		"values.yaml":         "replicas: 1\n",
		"templates/cm.yaml":   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n",
		"templates/NOTES.txt": "hello\n",
	}
	registryUsers = map[string]string{"alice": "s3cret", "bob": "hunter2"}
)

// fetchManifest reads ref of rep back: its descriptor and manifest.
func fetchManifest(t *testing.T, rep *remote.Repository, ref string) (ocispec.Descriptor, ocispec.Manifest) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	desc, rc, err := rep.FetchReference(ctx, ref)
	if err != nil {
		t.Fatalf("fetch manifest %s: %v", ref, err)
	}
	defer rc.Close()
	var m ocispec.Manifest
	if err := json.NewDecoder(rc).Decode(&m); err != nil {
		t.Fatalf("decode manifest %s: %v", ref, err)
	}
	return desc, m
}

// fetchBlob reads a blob of rep back and checks its digest.
func fetchBlob(t *testing.T, rep *remote.Repository, desc ocispec.Descriptor) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rc, err := rep.Fetch(ctx, desc)
	if err != nil {
		t.Fatalf("fetch blob %s: %v", desc.Digest, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read blob %s: %v", desc.Digest, err)
	}
	if got := digest.FromBytes(b); got != desc.Digest {
		t.Fatalf("blob %s read back with digest %s", desc.Digest, got)
	}
	return b
}

// untar lists a tar+gzip's entries: name -> body (symlinks: "-> target").
func untar(t *testing.T, data []byte) map[string]string {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		if h.Typeflag == tar.TypeSymlink {
			b = []byte("-> " + h.Linkname)
		}
		out[h.Name] = string(b)
	}
}

// wantManifest checks a manifest's media types: the registry's (desc)
// and those the manifest declares (helm's has no mediaType field).
func wantManifest(t *testing.T, what string, desc ocispec.Descriptor, m ocispec.Manifest, artifactType, configType string, layerTypes ...string) {
	t.Helper()
	var got []string
	for _, l := range m.Layers {
		got = append(got, l.MediaType)
	}
	if desc.MediaType != ocispec.MediaTypeImageManifest || (m.MediaType != "" && m.MediaType != desc.MediaType) ||
		m.ArtifactType != artifactType || m.Config.MediaType != configType || !slices.Equal(got, layerTypes) {
		t.Fatalf("%s: served as %s, manifest %q artifactType %q config %s layers %v; want %s, artifactType %q config %s layers %v",
			what, desc.MediaType, m.MediaType, m.ArtifactType, m.Config.MediaType, got, ocispec.MediaTypeImageManifest, artifactType, configType, layerTypes)
	}
}

// pushAndReadBack pushes a Flux artifact, a plain artifact and a chart to
// reg and checks what oras-go reads back.
func pushAndReadBack(t *testing.T, reg *Registry) {
	t.Helper()
	d := reg.PushFluxArtifact(t, "apps/flux", "v1", registryFiles)
	rep := reg.Repository(t, "apps/flux")
	desc, m := fetchManifest(t, rep, "v1")
	if desc.Digest.String() != d {
		t.Fatalf("flux artifact: pushed %s, tag resolves to %s", d, desc.Digest)
	}
	wantManifest(t, "flux artifact", desc, m, "", FluxConfigMediaType, FluxContentMediaType)
	for _, k := range []string{ocispec.AnnotationCreated, ocispec.AnnotationSource, ocispec.AnnotationRevision} {
		if m.Annotations[k] == "" {
			t.Errorf("flux artifact: no annotation %s in %v", k, m.Annotations)
		}
	}
	if cfg := fetchBlob(t, rep, m.Config); string(cfg) != "{}" {
		t.Errorf("flux artifact: config %q, want {}", cfg)
	}
	if got := untar(t, fetchBlob(t, rep, m.Layers[0])); !mapsEqual(got, registryFiles) {
		t.Errorf("flux artifact: layer holds %v, want %v", got, registryFiles)
	}

	d = reg.PushPlain(t, "apps/plain", "v1", registryFiles)
	rep = reg.Repository(t, "apps/plain")
	desc, m = fetchManifest(t, rep, "v1")
	if desc.Digest.String() != d {
		t.Fatalf("plain artifact: pushed %s, tag resolves to %s", d, desc.Digest)
	}
	wantManifest(t, "plain artifact", desc, m, PlainArtifactType, ocispec.MediaTypeEmptyJSON, ocispec.MediaTypeImageLayerGzip)
	if got := untar(t, fetchBlob(t, rep, m.Layers[0])); !mapsEqual(got, registryFiles) {
		t.Errorf("plain artifact: layer holds %v, want %v", got, registryFiles)
	}

	d = reg.PushChart(t, "charts/demo", registryChart)
	rep = reg.Repository(t, "charts/demo")
	desc, m = fetchManifest(t, rep, HelmTag("0.1.0+build.7"))
	if desc.Digest.String() != d {
		t.Fatalf("chart: helm pushed %s, tag resolves to %s", d, desc.Digest)
	}
	wantManifest(t, "chart", desc, m, "", HelmConfigMediaType, HelmChartMediaType)
	names := untar(t, fetchBlob(t, rep, m.Layers[0]))
	if _, ok := names["demo/templates/cm.yaml"]; !ok {
		t.Errorf("chart: layer holds %v, want demo/templates/cm.yaml", names)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// statusOf is the HTTP status of an oras-go error (0 if none).
func statusOf(err error) int {
	var resp *errcode.ErrorResponse
	if errors.As(err, &resp) {
		return resp.StatusCode
	}
	return 0
}

func resolve(rep *remote.Repository, ref string) (ocispec.Descriptor, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return rep.Resolve(ctx, ref)
}

// get is a GET of the registry's url with an optional basic user.
func get(t *testing.T, reg *Registry, url, user, pass string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	c := reg.HTTPClient()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// TestRegistryPlain: no TLS, no auth; the storage-level operations,
// hostile pushes, the access log and a restart.
func TestRegistryPlain(t *testing.T) {
	reg := Start(t, Options{})
	if reg.CAFile != "" || !strings.HasPrefix(reg.URL(), "http://127.0.0.1:") {
		t.Fatalf("plain registry: URL %s, CAFile %q", reg.URL(), reg.CAFile)
	}
	pushAndReadBack(t, reg)
	rep := reg.Repository(t, "apps/flux")

	t.Run("requests from the access log", func(t *testing.T) {
		reg.ResetRequests()
		if _, err := resolve(rep, "v1"); err != nil {
			t.Fatal(err)
		}
		if got, want := reg.Requests(), []string{"HEAD /v2/apps/flux/manifests/v1"}; !slices.Equal(got, want) {
			t.Fatalf("Requests() = %q, want %q", got, want)
		}
		reg.ResetRequests()
		if got := reg.Requests(); len(got) != 0 {
			t.Fatalf("Requests() after ResetRequests = %q", got)
		}
	})

	t.Run("tag revert and delete", func(t *testing.T) {
		first, _ := resolve(rep, "v1")
		second := reg.PushFluxArtifact(t, "apps/flux", "v1", map[string]string{"a.yaml": "b: 2\n"})
		if second == first.Digest.String() {
			t.Fatal("a different artifact pushed with the same digest")
		}
		reg.Tag(t, "apps/flux", first.Digest.String(), "v1")
		if d, err := resolve(rep, "v1"); err != nil || d.Digest != first.Digest {
			t.Fatalf("after Tag: v1 = %s, %v; want %s", d.Digest, err, first.Digest)
		}
		reg.DeleteTag(t, "apps/flux", "v1")
		if _, err := resolve(rep, "v1"); !errors.Is(err, errdef.ErrNotFound) {
			t.Fatalf("resolve a deleted tag: %v, want not found", err)
		}
		if _, err := resolve(rep, first.Digest.String()); err != nil {
			t.Fatalf("resolve the manifest of a deleted tag by digest: %v", err)
		}
	})

	t.Run("hostile manifest and blob", func(t *testing.T) {
		a := TarGz(t,
			TarEntry{Name: "../escape.yaml", Body: "x: 1\n"},
			TarEntry{Name: "/abs.yaml", Body: "y: 1\n"},
			TarEntry{Name: "link", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"},
			TarEntry{Name: "dir", Typeflag: tar.TypeDir},
		)
		if got := untar(t, a); got["../escape.yaml"] != "x: 1\n" || got["/abs.yaml"] != "y: 1\n" || got["link"] != "-> /etc/passwd" {
			t.Fatalf("hostile tar read back as %v", got)
		}
		b := []byte("not a tarball")
		d := reg.Push(t, "apps/hostile", "v1", Manifest{
			ArtifactType:    "application/x-unknown",
			ConfigMediaType: "application/x-config",
			Config:          []byte("not json"),
			Layers: []Layer{
				{MediaType: ocispec.MediaTypeImageLayerGzip, Data: a},
				{MediaType: "application/x-other", Data: b, Digest: digest.FromBytes(a).String(), Size: 1 << 40},
			},
			Annotations: map[string]string{"k": "v"},
		})
		hrep := reg.Repository(t, "apps/hostile")
		desc, m := fetchManifest(t, hrep, "v1")
		if desc.Digest.String() != d {
			t.Fatalf("hostile manifest: pushed %s, resolves to %s", d, desc.Digest)
		}
		wantManifest(t, "hostile manifest", desc, m, "application/x-unknown", "application/x-config", ocispec.MediaTypeImageLayerGzip, "application/x-other")
		if l := m.Layers[1]; l.Digest != digest.FromBytes(a) || l.Size != 1<<40 {
			t.Fatalf("lying layer declared as %s %d", l.Digest, l.Size)
		}
		path := reg.BlobPath(digest.FromBytes(b).String())
		if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, b) {
			t.Fatalf("BlobPath %s: %q, %v", path, got, err)
		}
		// Damage the first layer: the registry serves what the storage has.
		if err := os.WriteFile(reg.BlobPath(m.Layers[0].Digest.String()), []byte("damaged"), 0o644); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		rc, err := hrep.Fetch(ctx, ocispec.Descriptor{MediaType: m.Layers[0].MediaType, Digest: m.Layers[0].Digest, Size: int64(len("damaged"))})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(rc)
		rc.Close()
		if string(got) != "damaged" {
			t.Fatalf("damaged blob served as %q", got)
		}
	})

	t.Run("stop and start", func(t *testing.T) {
		reg.Stop()
		if _, err := resolve(reg.Repository(t, "apps/plain"), "v1"); err == nil {
			t.Fatal("resolve with the registry stopped succeeded")
		}
		reg.Start()
		if _, err := resolve(reg.Repository(t, "apps/plain"), "v1"); err != nil {
			t.Fatalf("resolve after a restart: %v", err)
		}
	})
}

// TestRegistryTLSBasic: HTTPS with the test CA and htpasswd users.
func TestRegistryTLSBasic(t *testing.T) {
	reg := Start(t, Options{TLS: true, Users: registryUsers})
	if reg.CAFile == "" || !strings.HasPrefix(reg.URL(), "https://127.0.0.1:") {
		t.Fatalf("TLS registry: URL %s, CAFile %q", reg.URL(), reg.CAFile)
	}
	pushAndReadBack(t, reg)

	if _, err := resolve(reg.RepositoryAs(t, "apps/flux", "bob", "hunter2"), "v1"); err != nil {
		t.Fatalf("resolve as the second user: %v", err)
	}
	for _, c := range []struct{ user, pass string }{{"alice", "wrong"}, {"mallory", "s3cret"}, {"", ""}} {
		// Without credentials oras-go gives up before asking.
		_, err := resolve(reg.RepositoryAs(t, "apps/flux", c.user, c.pass), "v1")
		if c.user != "" && statusOf(err) != http.StatusUnauthorized || err == nil {
			t.Errorf("resolve as %q/%q: %v, want 401", c.user, c.pass, err)
		}
		if resp := get(t, reg, reg.URL()+"/v2/", c.user, c.pass); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET /v2/ as %q/%q: %s, want 401", c.user, c.pass, resp.Status)
		}
	}
	if resp := get(t, reg, reg.URL()+"/v2/", "alice", "s3cret"); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /v2/ as alice: %s", resp.Status)
	}
	if _, err := http.Get(reg.URL() + "/v2/"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("GET without the test CA: %v, want a certificate error", err)
	}

	var cfg struct {
		Auths map[string]struct{ Auth string }
	}
	b, err := os.ReadFile(reg.DockerConfig(t, "alice", "s3cret"))
	if err == nil {
		err = json.Unmarshal(b, &cfg)
	}
	if err != nil || cfg.Auths[reg.Host].Auth != base64.StdEncoding.EncodeToString([]byte("alice:s3cret")) {
		t.Fatalf("DockerConfig: %s, %v", b, err)
	}
}

// TestRegistryToken: bearer tokens from the test token server.
func TestRegistryToken(t *testing.T) {
	reg := Start(t, Options{TLS: true, Token: true, Users: registryUsers})
	resp := get(t, reg, reg.URL()+"/v2/", "", "")
	challenge := resp.Header.Get("WWW-Authenticate")
	if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(challenge, `Bearer realm="https://127.0.0.1:`) || !strings.Contains(challenge, `service="`+tokenService+`"`) {
		t.Fatalf("GET /v2/ without a token: %s, WWW-Authenticate %q", resp.Status, challenge)
	}
	// Basic credentials are for the token server only.
	if resp := get(t, reg, reg.URL()+"/v2/", "alice", "s3cret"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /v2/ with basic credentials: %s, want 401", resp.Status)
	}
	pushAndReadBack(t, reg)
	if reg.TokenRequests() == 0 {
		t.Fatal("pushed without asking the token server")
	}
	realm := strings.Split(challenge, `"`)[1]
	scope := "?service=" + tokenService + "&scope=repository:apps/flux:pull"
	if resp := get(t, reg, realm+scope, "alice", "wrong"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("token with a wrong password: %s, want 401", resp.Status)
	}
	if resp := get(t, reg, realm+scope, "alice", "s3cret"); resp.StatusCode != http.StatusOK {
		t.Fatalf("token as alice: %s", resp.Status)
	}
	_, err := resolve(reg.RepositoryAs(t, "apps/flux", "alice", "wrong"), "v1")
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("resolve with a wrong password: %v, want the token server's 401", err)
	}
	if _, err := resolve(reg.RepositoryAs(t, "apps/flux", "bob", "hunter2"), "v1"); err != nil {
		t.Fatalf("resolve as bob: %v", err)
	}
}

// TestRegistryFront: the front's exact request log, injected failures and
// blob redirects, over TLS with basic auth and over HTTP with tokens.
func TestRegistryFront(t *testing.T) {
	reg := Start(t, Options{TLS: true, Users: registryUsers, Front: true})
	if reg.Host == reg.addr {
		t.Fatal("Host is the registry's own address, not the front's")
	}
	pushAndReadBack(t, reg)
	var upload bool
	for _, r := range reg.Requests() {
		upload = upload || strings.HasPrefix(r, "PUT /v2/apps/plain/blobs/uploads/")
	}
	if !upload {
		t.Fatalf("uploads bypassed the front (the registry's Location): %q", reg.Requests())
	}

	rep := reg.Repository(t, "apps/plain")
	_, m := fetchManifest(t, rep, "v1")
	t.Run("exact requests", func(t *testing.T) {
		reg.ResetRequests()
		if _, err := resolve(rep, "v1"); err != nil {
			t.Fatal(err)
		}
		_ = get(t, reg, reg.URL()+"/v2/", "alice", "s3cret")
		want := []string{"HEAD /v2/apps/plain/manifests/v1", "GET /v2/"}
		if got := reg.Requests(); !slices.Equal(got, want) {
			t.Fatalf("Requests() = %q, want %q", got, want)
		}
	})

	t.Run("fail", func(t *testing.T) {
		reg.Fail(http.StatusServiceUnavailable)
		if _, err := resolve(rep, "v1"); statusOf(err) != http.StatusServiceUnavailable {
			t.Fatalf("resolve while failing: %v, want 503", err)
		}
		reg.Fail(0)
		if _, err := resolve(rep, "v1"); err != nil {
			t.Fatalf("resolve after Fail(0): %v", err)
		}
	})

	t.Run("redirect", func(t *testing.T) {
		reg.RedirectBlobs()
		reg.ResetRequests()
		if got := untar(t, fetchBlob(t, rep, m.Layers[0])); !mapsEqual(got, registryFiles) {
			t.Fatalf("redirected blob holds %v", got)
		}
		if reg.RedirectHits() == 0 || reg.RedirectSawAuth() {
			t.Fatalf("redirect listener: %d hits, saw Authorization %v; want hits and no Authorization", reg.RedirectHits(), reg.RedirectSawAuth())
		}
		blob := reg.URL() + "/v2/apps/plain/blobs/" + m.Layers[0].Digest.String()
		if resp := get(t, reg, blob, "alice", "wrong"); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("blob GET with a wrong password: %s, want 401 (no redirect)", resp.Status)
		}
		resp := get(t, reg, blob, "alice", "s3cret")
		loc := resp.Header.Get("Location")
		if resp.StatusCode != http.StatusTemporaryRedirect || !strings.HasPrefix(loc, "https://127.0.0.1:") || strings.HasPrefix(loc, reg.URL()) {
			t.Fatalf("blob GET: %s to %q, want 307 to another port", resp.Status, loc)
		}
		// A client that sends its credentials along is seen.
		_ = get(t, reg, loc, "alice", "s3cret")
		if !reg.RedirectSawAuth() {
			t.Fatal("the redirect listener did not see the Authorization header sent to it")
		}
	})

	t.Run("stop and start behind the front", func(t *testing.T) {
		reg.Stop()
		if _, err := resolve(rep, "v1"); statusOf(err) != http.StatusBadGateway {
			t.Fatalf("resolve with the registry stopped: %v, want the front's 502", err)
		}
		reg.Start()
		if _, err := resolve(rep, "v1"); err != nil {
			t.Fatalf("resolve after a restart: %v", err)
		}
	})

	t.Run("tokens over HTTP", func(t *testing.T) {
		reg := Start(t, Options{Token: true, Users: registryUsers, Front: true})
		reg.PushPlain(t, "apps/plain", "v1", registryFiles)
		reg.RedirectBlobs()
		rep := reg.Repository(t, "apps/plain")
		_, m := fetchManifest(t, rep, "v1")
		if got := untar(t, fetchBlob(t, rep, m.Layers[0])); !mapsEqual(got, registryFiles) {
			t.Fatalf("redirected blob holds %v", got)
		}
		if reg.RedirectHits() == 0 || reg.RedirectSawAuth() {
			t.Fatalf("redirect listener: %d hits, saw Authorization %v", reg.RedirectHits(), reg.RedirectSawAuth())
		}
	})
}
