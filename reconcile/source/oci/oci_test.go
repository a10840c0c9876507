package oci

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		url, host, repo, err string
	}{
		{"oci://registry.example.com/platform/app", "registry.example.com", "platform/app", ""},
		{"oci://127.0.0.1:5000/a", "127.0.0.1:5000", "a", ""},
		{"oci://Registry.Example.com/a", "registry.example.com", "a", ""},
		{"oci://host", "", "", "want oci://HOST/REPOSITORY"},
		{"oci://host/", "", "", "want oci://HOST/REPOSITORY"},
		{"oci://host/app:v1", "", "", "tag or digest in --ref"},
		{"oci://host/app@sha256:00", "", "", "tag or digest in --ref"},
		{"oci://user:pass@host/app", "", "", "credentials in --oci-credentials-file"},
		{"oci://host/App", "", "", "is not a repository name"},
		{"oci://host/a//b", "", "", "is not a repository name"},
		{"https://host/a", "", "", "not an oci:// URL"},
	} {
		ref, err := ParseURL(tc.url)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseURL(%q) = %v, want an error with %q", tc.url, err, tc.err)
			}
			if err != nil && strings.Contains(err.Error(), "pass") {
				t.Errorf("ParseURL(%q): the error quotes the password: %v", tc.url, err)
			}
			continue
		}
		if err != nil || ref.Host != tc.host || ref.Repository != tc.repo {
			t.Errorf("ParseURL(%q) = %+v, %v; want %s / %s", tc.url, ref, err, tc.host, tc.repo)
		}
	}
}

func TestCheckRef(t *testing.T) {
	hex := strings.Repeat("ab", 32)
	for ref, want := range map[string]string{
		"": "latest", "latest": "latest", "6.5.0": "6.5.0", "v1_2-rc.1": "v1_2-rc.1",
		"sha256:" + hex: "sha256:" + hex,
		"sha256:abc":    "", "sha512:" + hex: "", "-v1": "", "a/b": "", strings.Repeat("x", 129): "",
	} {
		got, err := CheckRef(ref)
		if (err != nil) != (want == "") || got != want {
			t.Errorf("CheckRef(%q) = %q, %v; want %q", ref, got, err, want)
		}
	}
}

func TestLoopback(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1:5000": true, "127.1.2.3": true, "localhost:5000": true, "[::1]:5000": true,
		"10.0.0.1": false, "registry.example.com": false, "localhost.example.com": false, "[::ffff:10.0.0.1]:5000": false,
	} {
		if got := (Reference{Host: host, Repository: "a"}).Loopback(); got != want {
			t.Errorf("Loopback(%s) = %v, want %v", host, got, want)
		}
	}
}

// TestParse: each artifact format is told by its media types; anything
// else is refused with reason invalid, naming the media type.
func TestParse(t *testing.T) {
	layer := func(mt string) ocispec.Descriptor {
		return ocispec.Descriptor{MediaType: mt, Digest: digest.FromString(mt), Size: 1}
	}
	manifest := func(cfg, artifactType string, layers ...ocispec.Descriptor) []byte {
		m := ocispec.Manifest{MediaType: ocispec.MediaTypeImageManifest, ArtifactType: artifactType,
			Config: ocispec.Descriptor{MediaType: cfg, Digest: digest.FromString("{}"), Size: 2}, Layers: layers}
		m.SchemaVersion = 2
		b, _ := json.Marshal(m)
		return b
	}
	desc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromString("m")}
	for _, tc := range []struct {
		name   string
		raw    []byte
		format Format
		kind   string
		err    string
	}{
		{"flux", manifest(MediaTypeFluxConfig, "", layer(MediaTypeFluxContent)), FormatFiles, "Flux artifact", ""},
		{"helm", manifest(MediaTypeHelmConfig, "", layer(MediaTypeHelmChart), layer(MediaTypeHelmProvenance)), FormatChart, "Helm chart", ""},
		{"helm legacy layer", manifest(MediaTypeHelmConfig, "", layer(MediaTypeHelmChartLegacy)), FormatChart, "Helm chart", ""},
		{"plain", manifest(ocispec.MediaTypeEmptyJSON, "application/vnd.example", layer(MediaTypeLayerTarGzip)), FormatFiles, "OCI artifact", ""},
		{"plain two layers", manifest(ocispec.MediaTypeEmptyJSON, "", layer(MediaTypeLayerTarGzip), layer(MediaTypeLayerTarGzip)), 0, "", "of 2 layers"},
		{"plain other layer", manifest(ocispec.MediaTypeEmptyJSON, "", layer("application/x-zip")), 0, "", "application/x-zip"},
		{"flux two contents", manifest(MediaTypeFluxConfig, "", layer(MediaTypeFluxContent), layer(MediaTypeFluxContent)), 0, "", "with 2"},
		{"flux no content", manifest(MediaTypeFluxConfig, ""), 0, "", "without a " + MediaTypeFluxContent},
		{"image", manifest(ocispec.MediaTypeImageConfig, "", layer(MediaTypeLayerTarGzip)), 0, "", ocispec.MediaTypeImageConfig},
		{"image with artifactType", manifest(ocispec.MediaTypeImageConfig, "application/vnd.example", layer(MediaTypeLayerTarGzip)), 0, "", ocispec.MediaTypeImageConfig},
		{"index", []byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}`), 0, "", "is an index"},
		{"docker", []byte(`{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json"}`), 0, "", "container image"},
		{"unknown", []byte(`{"schemaVersion":2,"mediaType":"application/x-thing"}`), 0, "", `"application/x-thing"`},
		{"not json", []byte(`{`), 0, "", "not JSON"},
		{"sha512 layer", manifest(MediaTypeFluxConfig, "", ocispec.Descriptor{MediaType: MediaTypeFluxContent, Digest: digest.SHA512.FromString("x"), Size: 1}), 0, "", "sha256 digests only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := Parse(tc.raw, desc)
			if tc.err != "" {
				var e *Error
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.As(err, &e) || e.Reason != ReasonInvalid {
					t.Fatalf("Parse = %v, want an invalid error with %q", err, tc.err)
				}
				return
			}
			if err != nil || a.Format != tc.format || a.Kind != tc.kind {
				t.Fatalf("Parse = %+v, %v; want %v %s", a, err, tc.format, tc.kind)
			}
		})
	}
}
