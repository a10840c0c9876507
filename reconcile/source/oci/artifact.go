package oci

import (
	"encoding/json"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// The media types of the artifacts recond reads.
const (
	// Flux's `flux push artifact`: a tar+gzip of files.
	MediaTypeFluxConfig  = "application/vnd.cncf.flux.config.v1+json"
	MediaTypeFluxContent = "application/vnd.cncf.flux.content.v1.tar+gzip"
	// Helm's `helm push`: a chart archive (and, maybe, its provenance).
	MediaTypeHelmConfig        = "application/vnd.cncf.helm.config.v1+json"
	MediaTypeHelmChart         = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
	MediaTypeHelmChartLegacy   = "application/tar+gzip"
	MediaTypeHelmProvenance    = "application/vnd.cncf.helm.chart.provenance.v1.prov"
	MediaTypeLayerTarGzip      = ocispec.MediaTypeImageLayerGzip
	mediaTypeDockerManifest    = "application/vnd.docker.distribution.manifest.v2+json"
	mediaTypeDockerList        = "application/vnd.docker.distribution.manifest.list.v2+json"
	mediaTypeDockerImageConfig = "application/vnd.docker.container.image.v1+json"
)

// Format is how an artifact's layer becomes a tree of files.
type Format int

const (
	// FormatFiles is a tar+gzip of files: rendered like a Git tree, with
	// --path inside it (Flux artifacts and plain OCI artifacts).
	FormatFiles Format = iota
	// FormatChart is a Helm chart archive: its one top-level directory is
	// the chart's root.
	FormatChart
)

// Artifact is what recond reads of a manifest: its one content layer and
// how to read it.
type Artifact struct {
	Format Format
	// Kind says which artifact it is, for messages ("Flux artifact", "Helm
	// chart", "OCI artifact").
	Kind string
	// Layer is the content layer.
	Layer ocispec.Descriptor
	// Created is the manifest's org.opencontainers.image.created
	// annotation (zero when absent or not RFC 3339).
	Created time.Time
	// Annotations are the manifest's.
	Annotations map[string]string
}

// Parse reads a manifest (verified against desc by Client.Manifest) and
// selects its content layer by media types. Anything but the three formats
// recond reads fails with reason invalid, naming the media type.
func Parse(raw []byte, desc ocispec.Descriptor) (Artifact, error) {
	var head struct {
		MediaType string `json:"mediaType"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return Artifact{}, invalidf("manifest %s: not JSON: %v", desc.Digest, err)
	}
	mt := head.MediaType
	if mt == "" {
		mt = desc.MediaType
	}
	switch mt {
	case ocispec.MediaTypeImageManifest:
	case ocispec.MediaTypeImageIndex, mediaTypeDockerList:
		return Artifact{}, invalidf("manifest %s is an index (%s): recond reads one artifact, not an index of several", desc.Digest, mt)
	case mediaTypeDockerManifest:
		return Artifact{}, invalidf("manifest %s is a container image (%s): recond reads Flux artifacts, Helm charts and OCI artifacts of one tar+gzip layer", desc.Digest, mt)
	default:
		return Artifact{}, invalidf("manifest %s has media type %q: recond reads OCI image manifests (%s)", desc.Digest, mt, ocispec.MediaTypeImageManifest)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return Artifact{}, invalidf("manifest %s: %v", desc.Digest, err)
	}
	if m.SchemaVersion != 2 {
		return Artifact{}, invalidf("manifest %s: schemaVersion %d, want 2", desc.Digest, m.SchemaVersion)
	}
	a := Artifact{Annotations: m.Annotations}
	if t, err := time.Parse(time.RFC3339, m.Annotations[ocispec.AnnotationCreated]); err == nil {
		a.Created = t.UTC()
	}
	var want []string
	switch cfg := m.Config.MediaType; {
	case cfg == MediaTypeFluxConfig:
		a.Format, a.Kind, want = FormatFiles, "Flux artifact", []string{MediaTypeFluxContent}
	case cfg == MediaTypeHelmConfig:
		a.Format, a.Kind, want = FormatChart, "Helm chart", []string{MediaTypeHelmChart, MediaTypeHelmChartLegacy}
	case cfg == ocispec.MediaTypeEmptyJSON || m.ArtifactType != "" && cfg != mediaTypeDockerImageConfig && cfg != ocispec.MediaTypeImageConfig:
		a.Format, a.Kind, want = FormatFiles, "OCI artifact", []string{MediaTypeLayerTarGzip}
		if len(m.Layers) != 1 {
			return Artifact{}, invalidf("manifest %s: an OCI artifact (config %s) of %d layers: recond reads one of a single %s layer", desc.Digest, cfg, len(m.Layers), MediaTypeLayerTarGzip)
		}
	default:
		what := cfg
		if m.ArtifactType != "" {
			what = m.ArtifactType + " (config " + cfg + ")"
		}
		return Artifact{}, invalidf("manifest %s is of media type %s: recond reads Flux artifacts (%s), Helm charts (%s) and OCI artifacts of one %s layer",
			desc.Digest, what, MediaTypeFluxConfig, MediaTypeHelmConfig, MediaTypeLayerTarGzip)
	}
	var found []ocispec.Descriptor
	var other []string
	for _, l := range m.Layers {
		if contains(want, l.MediaType) {
			found = append(found, l)
		} else if l.MediaType != MediaTypeHelmProvenance {
			other = append(other, l.MediaType)
		}
	}
	switch {
	case len(found) == 0 && len(other) > 0:
		return Artifact{}, invalidf("manifest %s: a %s whose layer is of media type %s, not %s", desc.Digest, a.Kind, other[0], want[0])
	case len(found) == 0:
		return Artifact{}, invalidf("manifest %s: a %s without a %s layer", desc.Digest, a.Kind, want[0])
	case len(found) > 1:
		return Artifact{}, invalidf("manifest %s: a %s with %d %s layers; recond reads one", desc.Digest, a.Kind, len(found), want[0])
	}
	a.Layer = found[0]
	if !IsDigest(a.Layer.Digest.String()) {
		return Artifact{}, invalidf("manifest %s: layer digest %q: recond reads sha256 digests only", desc.Digest, a.Layer.Digest)
	}
	return a, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// String names the format.
func (f Format) String() string {
	if f == FormatChart {
		return "chart"
	}
	return "files"
}
