package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content/memory"
	"oras.land/oras-go/v2/registry/remote"
)

// ociStep holds a third namespace against an artifact in a registry on
// loopback (Debian's docker-registry): the example app pushed as Flux
// does (`flux push artifact`), synced at its digest, pushed again with a
// change and synced again; a converged sync is one HEAD request.
func ociStep(s *session) error {
	const ns = "demo-oci"
	ctx, cs, work := s.ctx, s.cs, s.work
	say("an OCI artifact as the source: a registry on 127.0.0.1 (docker-registry), the example app pushed as `flux push artifact` does (docs/oci.md)")
	bin, err := exec.LookPath("docker-registry")
	if err != nil {
		return fmt.Errorf("docker-registry is not installed (make registry installs Debian's package): %w", err)
	}
	host, stop, err := startRegistry(bin, filepath.Join(work, "registry"))
	if err != nil {
		return err
	}
	defer stop()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	files, err := readTree(s.examples)
	if err != nil {
		return err
	}
	push := func() (string, error) { return pushFluxArtifact(ctx, host, "demo/app", "production", files) }
	sync := func() error {
		log, err := logOf(exec.Command(s.recondBin, "sync", "--repo", "oci://"+host+"/demo/app", "--ref", "production", "--oci-insecure",
			"--namespace", ns, "--kubeconfig", s.kubeconfig, "--log-format", "text", "--cache-dir", filepath.Join(work, "oci-cache")))
		if err != nil {
			return fmt.Errorf("recond sync (oci): %w\n%s", err, log)
		}
		printLines(log, " tick ")
		return nil
	}
	d, err := push()
	if err != nil {
		return err
	}
	fmt.Printf("pushed oci://%s/demo/app:production = %s; recond sync --repo oci://%s/demo/app --ref production --oci-insecure\n", host, d, host)
	if err := sync(); err != nil {
		return err
	}
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "web-config", metav1.GetOptions{})
	if err == nil {
		fmt.Printf("ConfigMap web-config: recond.dev/revision=%s (the manifest digest)\n", cm.Annotations["recond.dev/revision"])
	}
	files["configmap.yaml"] = strings.Replace(files["configmap.yaml"], "\ndata:\n", "\ndata:\n  pushed: \"again\"\n", 1)
	if d, err = push(); err != nil {
		return err
	}
	fmt.Printf("pushed again with a change: production = %s; one HEAD finds it moved, one pull, only the ConfigMap rewritten\n", d)
	if err := sync(); err != nil {
		return err
	}
	fmt.Println("a new process again: one HEAD, the digest is cached, nothing to write")
	return sync()
}

// startRegistry runs docker-registry on a free loopback port with storage
// under dir; stop ends it.
func startRegistry(bin, dir string) (host string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	host = ln.Addr().String()
	ln.Close()
	cfg := fmt.Sprintf("version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: %s\n  delete:\n    enabled: true\nhttp:\n  addr: %s\n  secret: demo\n",
		filepath.Join(dir, "storage"), host)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, err
	}
	path := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return "", nil, err
	}
	cmd := exec.Command(bin, "serve", path)
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop = func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get("http://" + host + "/v2/"); err == nil {
			resp.Body.Close()
			return host, stop, nil
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, fmt.Errorf("docker-registry did not answer on %s", host)
		}
	}
}

// readTree reads the regular files of dir (one level).
func readTree(dir string) (map[string]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	files := map[string]string{}
	for _, e := range ents {
		if e.Type().IsRegular() {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				return nil, err
			}
			files[e.Name()] = string(b)
		}
	}
	return files, nil
}

// pushFluxArtifact pushes files as `flux push artifact` does (Flux's config
// and content media types) and tags it; it returns the manifest's digest.
func pushFluxArtifact(ctx context.Context, host, repo, tag string, files map[string]string) (string, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(files[n])), Typeflag: tar.TypeReg}); err != nil {
			return "", err
		}
		if _, err := tw.Write([]byte(files[n])); err != nil {
			return "", err
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	store := memory.New()
	add := func(mediaType string, b []byte) (ocispec.Descriptor, error) {
		d := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(b), Size: int64(len(b))}
		return d, store.Push(ctx, d, bytes.NewReader(b))
	}
	config, err := add("application/vnd.cncf.flux.config.v1+json", []byte("{}"))
	if err != nil {
		return "", err
	}
	layer, err := add("application/vnd.cncf.flux.content.v1.tar+gzip", buf.Bytes())
	if err != nil {
		return "", err
	}
	desc, err := oras.PackManifest(ctx, store, oras.PackManifestVersion1_1, "", oras.PackManifestOptions{
		ConfigDescriptor: &config, Layers: []ocispec.Descriptor{layer},
		ManifestAnnotations: map[string]string{ocispec.AnnotationCreated: time.Now().UTC().Format(time.RFC3339)},
	})
	if err != nil {
		return "", err
	}
	if err := store.Tag(ctx, desc, tag); err != nil {
		return "", err
	}
	dst, err := remote.NewRepository(host + "/" + repo)
	if err != nil {
		return "", err
	}
	dst.PlainHTTP = true
	if _, err := oras.Copy(ctx, store, tag, dst, tag, oras.DefaultCopyOptions); err != nil {
		return "", err
	}
	return desc.Digest.String(), nil
}
