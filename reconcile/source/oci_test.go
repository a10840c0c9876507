package source

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/reconcile/source/oci"
)

func ociCM(name, value string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\ndata:\n  v: \"" + value + "\"\n"
}

// ociSourceFor is a Source following repo:ref of reg, plain HTTP.
func ociSourceFor(t *testing.T, reg *testenv.Registry, repo, ref string, mod func(*Config)) *Source {
	t.Helper()
	cfg := Config{URL: "oci://" + reg.Host + "/" + repo, Ref: ref, CacheDir: t.TempDir()}
	if reg.CAFile != "" {
		cfg.OCI.CAFile = reg.CAFile
	} else {
		cfg.OCI.Insecure = true
	}
	if mod != nil {
		mod(&cfg)
	}
	return mustNew(t, cfg)
}

func mustRender(t *testing.T, s *Source, rev string) []string {
	t.Helper()
	ms, err := s.Render(context.Background(), rev)
	if err != nil {
		t.Fatalf("Render %s: %v", rev, err)
	}
	return names(ms)
}

// artifactDirOf is where s (an OCI source) caches the artifact of digest
// rev.
func artifactDirOf(t testing.TB, s *Source, rev string) string {
	t.Helper()
	o, ok := s.f.(*oci.Source)
	if !ok {
		t.Fatalf("%s is not an OCI source", s.DisplayURL())
	}
	return filepath.Join(o.CacheDir(), strings.TrimPrefix(rev, "sha256:"))
}

func reasonOfErr(err error) Reason {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

// TestOCILifecycle follows a tag of a real registry: the first sync pulls,
// a converged fetch is one HEAD and nothing else, a new push moves the
// revision, a revert to an older digest is read from the cache, a deleted
// tag is not_found, and a damaged cache is pulled again.
func TestOCILifecycle(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a registry")
	}
	reg := testenv.StartRegistry(t, testenv.RegistryOptions{Front: true})
	d1 := reg.PushFluxArtifact(t, "apps/web", "latest", map[string]string{"app/a.yaml": ociCM("a", "1"), "other/x.yaml": ociCM("x", "1")})
	s := ociSourceFor(t, reg, "apps/web", "latest", func(c *Config) { c.Path = "app" })

	rev := mustFetch(t, s)
	if rev.SHA != d1 || !rev.Fetched {
		t.Fatalf("first fetch %+v, want %s pulled", rev, d1)
	}
	if got := mustRender(t, s, rev.SHA); !slices.Equal(got, []string{"app/a.yaml ConfigMap/a"}) {
		t.Fatalf("render %v", got)
	}

	reg.ResetRequests()
	rev = mustFetch(t, s)
	if rev.SHA != d1 || rev.Fetched {
		t.Fatalf("converged fetch %+v, want %s from the cache", rev, d1)
	}
	if got := reg.Requests(); !slices.Equal(got, []string{"HEAD /v2/apps/web/manifests/latest"}) {
		t.Fatalf("a converged fetch made requests %q, want one HEAD", got)
	}

	d2 := reg.PushFluxArtifact(t, "apps/web", "latest", map[string]string{"app/a.yaml": ociCM("a", "2"), "app/b.yaml": ociCM("b", "2")})
	if moved, err := s.Moved(context.Background(), rev); err != nil || !moved {
		t.Fatalf("Moved = %v, %v after a push", moved, err)
	}
	rev = mustFetch(t, s)
	if rev.SHA != d2 || !rev.Fetched {
		t.Fatalf("fetch after a push %+v, want %s pulled", rev, d2)
	}
	if got := mustRender(t, s, rev.SHA); !slices.Equal(got, []string{"app/a.yaml ConfigMap/a", "app/b.yaml ConfigMap/b"}) {
		t.Fatalf("render %v", got)
	}

	// A revert: the tag moves back to an older digest, cached.
	reg.Tag(t, "apps/web", d1, "latest")
	reg.ResetRequests()
	rev = mustFetch(t, s)
	if rev.SHA != d1 || rev.Fetched {
		t.Fatalf("fetch after a revert %+v, want %s from the cache", rev, d1)
	}
	if got := reg.Requests(); len(got) != 1 {
		t.Fatalf("a revert to a cached digest made requests %q, want one HEAD", got)
	}

	// A damaged cache: the render fails as the cache's fault, the next
	// fetch pulls the artifact again, and it renders.
	layer := artifactDirOf(t, s, d1) + "/layer.tar.gz"
	if err := os.WriteFile(layer, []byte("damaged"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Render(context.Background(), d1); err == nil || !readFault(err) {
		t.Fatalf("render of a damaged cache: %v, want a read fault", err)
	}
	rev = mustFetch(t, s)
	if !rev.Fetched {
		t.Fatalf("fetch after a damaged render %+v, want a pull", rev)
	}
	if got := mustRender(t, s, d1); !slices.Equal(got, []string{"app/a.yaml ConfigMap/a"}) {
		t.Fatalf("render after the pull %v", got)
	}

	// The tag deleted: not_found, naming the tag.
	reg.DeleteTag(t, "apps/web", "latest")
	_, err := s.Fetch(context.Background())
	if reasonOfErr(err) != ReasonNotFound || !strings.Contains(err.Error(), "latest") {
		t.Fatalf("fetch of a deleted tag: %v (reason %q), want not_found naming the tag", err, reasonOfErr(err))
	}
}

// TestOCIDigestRef: a digest ref needs no request once pulled, and never
// moves.
func TestOCIDigestRef(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a registry")
	}
	reg := testenv.StartRegistry(t, testenv.RegistryOptions{Front: true})
	d := reg.PushPlain(t, "apps/plain", "v1", map[string]string{"a.yaml": ociCM("a", "1")})
	s := ociSourceFor(t, reg, "apps/plain", d, nil)
	if rev := mustFetch(t, s); rev.SHA != d || !rev.Fetched {
		t.Fatalf("fetch %+v", rev)
	}
	if got := mustRender(t, s, d); !slices.Equal(got, []string{"a.yaml ConfigMap/a"}) {
		t.Fatalf("render %v", got)
	}
	reg.ResetRequests()
	if rev := mustFetch(t, s); rev.SHA != d || rev.Fetched {
		t.Fatalf("second fetch %+v", rev)
	}
	if moved, err := s.Moved(context.Background(), Revision{SHA: d}); moved || err != nil {
		t.Fatalf("Moved = %v, %v for a digest", moved, err)
	}
	if got := reg.Requests(); len(got) != 0 {
		t.Fatalf("a cached digest made requests %q", got)
	}
}

// TestOCIFormats renders each artifact format recond reads, and refuses
// others naming their media type.
func TestOCIFormats(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a registry")
	}
	reg := testenv.StartRegistry(t, testenv.RegistryOptions{})
	chart := map[string]string{
		"Chart.yaml":          "apiVersion: v2\nname: web\nversion: 1.2.3\n",
		"values.yaml":         "replicas: 2\n",
		"templates/cm.yaml":   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-web\ndata:\n  r: \"{{ .Values.replicas }}\"\n",
		"templates/NOTES.txt": "hello",
	}
	dChart := reg.PushChart(t, "charts/web", chart)
	s := ociSourceFor(t, reg, "charts/web", "1.2.3", func(c *Config) { c.Helm.Release = "demo" })
	if rev := mustFetch(t, s); rev.SHA != dChart {
		t.Fatalf("chart fetch %+v, want %s", rev, dChart)
	}
	if got := mustRender(t, s, dChart); !slices.Equal(got, []string{"web/templates/cm.yaml ConfigMap/demo-web"}) && !slices.Equal(got, []string{"templates/cm.yaml ConfigMap/demo-web"}) {
		t.Fatalf("chart render %v", got)
	}
	if s.Chart(dChart) == nil {
		t.Error("the chart's render did not say it was a chart")
	}

	// A chart's path is its root.
	sp := ociSourceFor(t, reg, "charts/web", "1.2.3", func(c *Config) { c.Path = "templates" })
	if _, err := sp.Render(context.Background(), mustFetch(t, sp).SHA); err == nil || !strings.Contains(err.Error(), "leave --path empty") {
		t.Fatalf("a chart with --path: %v", err)
	}

	kust := map[string]string{
		"deploy/kustomization.yaml": "resources:\n- a.yaml\nnamePrefix: k-\n",
		"deploy/a.yaml":             ociCM("a", "1"),
	}
	dK := reg.PushFluxArtifact(t, "apps/kust", "v1", kust)
	sk := ociSourceFor(t, reg, "apps/kust", "v1", func(c *Config) { c.Path = "deploy" })
	if got := mustRender(t, sk, mustFetch(t, sk).SHA); len(got) != 1 || !strings.HasSuffix(got[0], "ConfigMap/k-a") {
		t.Fatalf("kustomize render of %s: %v", dK, got)
	}

	image := testenv.Manifest{ConfigMediaType: "application/vnd.oci.image.config.v1+json", Config: []byte(`{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}`),
		Layers: []testenv.Layer{{MediaType: "application/vnd.oci.image.layer.v1.tar+gzip", Data: testenv.FilesTarGz(t, map[string]string{"bin/sh": "x"})}}}
	for name, m := range map[string]testenv.Manifest{
		"container image": image,
		"unknown artifact": {ArtifactType: "application/vnd.example.thing", ConfigMediaType: "application/vnd.example.config+json", Config: []byte("{}"),
			Layers: []testenv.Layer{{MediaType: "application/vnd.example.layer", Data: []byte("x")}}},
		"flux without content": {ConfigMediaType: "application/vnd.cncf.flux.config.v1+json", Config: []byte("{}"),
			Layers: []testenv.Layer{{MediaType: "application/vnd.example.layer", Data: []byte("x")}}},
		"two layers": {ArtifactType: "application/vnd.example.thing", Config: []byte("{}"),
			Layers: []testenv.Layer{{MediaType: "application/vnd.oci.image.layer.v1.tar+gzip", Data: testenv.FilesTarGz(t, map[string]string{"a.yaml": ociCM("a", "1")})},
				{MediaType: "application/vnd.oci.image.layer.v1.tar+gzip", Data: testenv.FilesTarGz(t, map[string]string{"b.yaml": ociCM("b", "1")})}}},
	} {
		t.Run(name, func(t *testing.T) {
			reg.Push(t, "bad/"+strings.ReplaceAll(name, " ", "-"), "v1", m)
			sb := ociSourceFor(t, reg, "bad/"+strings.ReplaceAll(name, " ", "-"), "v1", nil)
			_, err := sb.Fetch(context.Background())
			if reasonOfErr(err) != ReasonInvalid || !strings.Contains(err.Error(), "application/vnd.") {
				t.Fatalf("fetch: %v (reason %q), want invalid naming the media type", err, reasonOfErr(err))
			}
		})
	}
}

// TestOCILayerBounds: a layer larger than --render-max-bytes is refused
// before it is fetched, and a hostile tree fails the render with reason
// invalid, naming the entry.
func TestOCILayerBounds(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a registry")
	}
	reg := testenv.StartRegistry(t, testenv.RegistryOptions{Front: true})
	files := map[string]string{}
	for i := range 200 {
		files[strings.Repeat("d", 1+i%5)+"/"+string(rune('a'+i%26))+strings.Repeat("x", i)+".yaml"] = ociCM("c", strings.Repeat("v", i))
	}
	reg.PushFluxArtifact(t, "apps/big", "v1", files)
	s := ociSourceFor(t, reg, "apps/big", "v1", func(c *Config) { c.Limits.MaxBytes = 1024 })
	reg.ResetRequests()
	_, err := s.Fetch(context.Background())
	if reasonOfErr(err) != ReasonInvalid || !strings.Contains(err.Error(), "--render-max-bytes") {
		t.Fatalf("fetch of a layer over the limit: %v (reason %q)", err, reasonOfErr(err))
	}
	for _, r := range reg.Requests() {
		if strings.Contains(r, "/blobs/") {
			t.Fatalf("the layer over the limit was fetched: %q", reg.Requests())
		}
	}

	// A manifest over its bound is refused before it is fetched.
	s = ociSourceFor(t, reg, "apps/big", "v1", func(c *Config) { c.Limits.MaxFileBytes = 256 })
	reg.ResetRequests()
	_, err = s.Fetch(context.Background())
	if reasonOfErr(err) != ReasonInvalid || !strings.Contains(err.Error(), "more than the 256 a manifest may have") {
		t.Fatalf("fetch of a manifest over the limit: %v (reason %q)", err, reasonOfErr(err))
	}
	if got := reg.Requests(); len(got) != 1 || !strings.HasPrefix(got[0], "HEAD ") {
		t.Fatalf("a manifest over the limit was fetched: %q", got)
	}

	reg.Push(t, "apps/hostile", "v1", testenv.Manifest{ConfigMediaType: "application/vnd.cncf.flux.config.v1+json", Config: []byte("{}"),
		Layers: []testenv.Layer{{MediaType: "application/vnd.cncf.flux.content.v1.tar+gzip",
			Data: testenv.TarGz(t, testenv.TarEntry{Name: "a.yaml", Body: ociCM("a", "1")}, testenv.TarEntry{Name: "../escape.yaml", Body: ociCM("b", "1")})}}})
	sh := ociSourceFor(t, reg, "apps/hostile", "v1", nil)
	rev := mustFetch(t, sh)
	_, err = sh.Render(context.Background(), rev.SHA)
	var me *ManifestError
	if !errors.As(err, &me) || !strings.Contains(err.Error(), "layer entry ../escape.yaml") {
		t.Fatalf("render of a hostile layer: %v", err)
	}
}

// TestOCIWorker: an artifact renders in the render worker as in-process,
// and a damaged cache is the cache's fault there too.
func TestOCIWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a registry")
	}
	reg := testenv.StartRegistry(t, testenv.RegistryOptions{})
	d := reg.PushFluxArtifact(t, "apps/kust", "v1", map[string]string{
		"deploy/kustomization.yaml": "resources:\n- a.yaml\nnamePrefix: k-\n",
		"deploy/a.yaml":             ociCM("a", "1"),
	})
	s := ociSourceFor(t, reg, "apps/kust", "v1", func(c *Config) { c.Path, c.Worker = "deploy", testWorker(t) })
	mustFetch(t, s)
	if got := mustRender(t, s, d); len(got) != 1 || !strings.HasSuffix(got[0], "ConfigMap/k-a") {
		t.Fatalf("render in the worker: %v", got)
	}
	if err := os.WriteFile(artifactDirOf(t, s, d)+"/layer.tar.gz", []byte("damaged"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Render(context.Background(), d); err == nil || !readFault(err) {
		t.Fatalf("render of a damaged cache in the worker: %v, want a read fault", err)
	}
	if rev := mustFetch(t, s); !rev.Fetched {
		t.Fatalf("fetch after a damaged render %+v, want a pull", rev)
	}
}

// TestOCITagLikeASHA: a tag of 40 hex digits (a commit's SHA, as CI tags
// artifacts) is a tag: it moves.
func TestOCITagLikeASHA(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a registry")
	}
	reg := testenv.StartRegistry(t, testenv.RegistryOptions{})
	tag := strings.Repeat("0123456789", 4)
	reg.PushPlain(t, "apps/ci", tag, map[string]string{"a.yaml": ociCM("a", "1")})
	s := ociSourceFor(t, reg, "apps/ci", tag, nil)
	rev := mustFetch(t, s)
	if moved, err := s.Moved(context.Background(), rev); moved || err != nil {
		t.Fatalf("Moved = %v, %v before a push", moved, err)
	}
	reg.PushPlain(t, "apps/ci", tag, map[string]string{"a.yaml": ociCM("a", "2")})
	if moved, err := s.Moved(context.Background(), rev); !moved || err != nil {
		t.Fatalf("Moved = %v, %v after a push to a tag that looks like a SHA", moved, err)
	}
}
