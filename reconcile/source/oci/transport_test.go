package oci

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/registry/remote/credentials"
)

// TestWithoutQueries: a URL an error quotes loses its query, where a
// presigned storage URL keeps its credentials.
func TestWithoutQueries(t *testing.T) {
	err := errors.New(`GET "https://bucket.s3.example.com/blobs/sha256/ab?X-Amz-Credential=AKIA&X-Amz-Signature=f00d": 403 Forbidden; http://127.0.0.1:5000/v2/?token=secret#frag`)
	got := withoutQueries(err).Error()
	for _, secret := range []string{"AKIA", "f00d", "token=secret", "frag"} {
		if strings.Contains(got, secret) {
			t.Errorf("%q still holds %q", got, secret)
		}
	}
	if !strings.Contains(got, "https://bucket.s3.example.com/blobs/sha256/ab?…") || !errors.Is(withoutQueries(err), err) {
		t.Errorf("withoutQueries = %q: want the URL without its query, and the cause kept", got)
	}
}

// TestPlainHTTPStaysOnLoopback: a loopback registry that redirects a blob
// to a plain HTTP URL elsewhere is not followed there, and the error does
// not quote the redirect's query.
func TestPlainHTTPStaysOnLoopback(t *testing.T) {
	blob := []byte("layer")
	desc := ocispec.Descriptor{MediaType: MediaTypeLayerTarGzip, Digest: digest.FromBytes(blob), Size: int64(len(blob))}
	for _, target := range []string{
		"http://192.0.2.1/blob?X-Amz-Signature=s3cr3t", // a storage host in clear
		"http://localhost.example.com/blob?sig=s3cr3t",
	} {
		reg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target, http.StatusTemporaryRedirect)
		}))
		ref, err := ParseURL("oci://" + strings.TrimPrefix(reg.URL, "http://") + "/apps/a")
		if err != nil {
			t.Fatal(err)
		}
		c, err := New(ref, Options{Insecure: true})
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		err = c.Blob(context.Background(), desc, 1<<20, &out)
		reg.Close()
		if err == nil || !strings.Contains(err.Error(), "refused plain HTTP") {
			t.Fatalf("blob redirected to %s: %v, want a refusal", target, err)
		}
		if strings.Contains(err.Error(), "s3cr3t") {
			t.Fatalf("the error quotes the redirect's query: %v", err)
		}
	}
}

// TestCredentialFor: credentials are found by host[:port], however the
// dockerconfigjson keys them, Docker Hub's under any of its names.
func TestCredentialFor(t *testing.T) {
	cfg := []byte(`{"auths": {
		"https://index.docker.io/v1/": {"auth": "aHViOmh1Yi1wYXNz"},
		"registry.example.com:5000": {"username": "u", "password": "p"},
		"https://ghcr.example.com": {"auth": "Z2g6Z2gtcGFzcw=="}}}`)
	store, err := credentials.NewMemoryStoreFromDockerConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	get := credentialFor(store)
	for host, want := range map[string]string{
		"registry-1.docker.io": "hub", "docker.io": "hub", "index.docker.io": "hub",
		"registry.example.com:5000": "u", "ghcr.example.com": "gh", "registry.example.com": "", "other.example.com": "",
	} {
		cred, err := get(context.Background(), host)
		if err != nil || cred.Username != want {
			t.Errorf("credentials of %s: %q, %v; want user %q", host, cred.Username, err, want)
		}
	}
}
