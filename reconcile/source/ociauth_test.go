package source

import (
	"context"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"recond.dev/recond/internal/testenv"
)

// TestOCITransport: credentials, TLS and the token flow as the ecosystem
// does them, each failure with its reason, and no credential in any error.
func TestOCITransport(t *testing.T) {
	if testing.Short() {
		t.Skip("starts registries")
	}
	const user, pass = "deployer", "s3cret-Pa55word"
	files := map[string]string{"a.yaml": ociCM("a", "1")}
	cases := []struct {
		name string
		opts testenv.RegistryOptions
	}{
		{"basic over TLS", testenv.RegistryOptions{TLS: true, Users: map[string]string{user: pass}}},
		{"token over TLS", testenv.RegistryOptions{TLS: true, Token: true, Users: map[string]string{user: pass}}},
		{"token over HTTP", testenv.RegistryOptions{Token: true, Users: map[string]string{user: pass}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reg := testenv.StartRegistry(t, tc.opts)
			d := reg.PushPlain(t, "apps/a", "v1", files)
			good := reg.DockerConfig(t, user, pass)
			bad := reg.DockerConfig(t, user, "wrong-"+pass)

			s := ociSourceFor(t, reg, "apps/a", "v1", func(c *Config) { c.OCI.CredentialsFile = good })
			if rev := mustFetch(t, s); rev.SHA != d {
				t.Fatalf("fetch %+v, want %s", rev, d)
			}
			if got := mustRender(t, s, d); !slices.Equal(got, []string{"a.yaml ConfigMap/a"}) {
				t.Fatalf("render %v", got)
			}
			// Credentials are read at every pull: rotated to wrong ones, the
			// next fetch is refused.
			b, _ := os.ReadFile(bad)
			if err := os.WriteFile(good, b, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := s.Fetch(context.Background())
			if reasonOfErr(err) != ReasonAuth {
				t.Fatalf("fetch with wrong credentials: %v (reason %q), want auth", err, reasonOfErr(err))
			}
			if strings.Contains(err.Error(), pass) {
				t.Fatalf("the error quotes the password: %v", err)
			}

			anon := ociSourceFor(t, reg, "apps/a", "v1", nil)
			if _, err := anon.Fetch(context.Background()); reasonOfErr(err) != ReasonAuth {
				t.Fatalf("fetch without credentials: %v (reason %q), want auth", err, reasonOfErr(err))
			}

			if tc.opts.TLS {
				// Without the CA, TLS does not verify.
				noCA := ociSourceFor(t, reg, "apps/a", "v1", func(c *Config) { c.OCI.CAFile, c.OCI.CredentialsFile = "", good })
				_, err := noCA.Fetch(context.Background())
				if err == nil || !strings.Contains(err.Error(), "certificate") {
					t.Fatalf("fetch without the CA: %v", err)
				}
			}
		})
	}
}

// TestOCIInsecureLoopbackOnly: plain HTTP is for a loopback registry only.
func TestOCIInsecureLoopbackOnly(t *testing.T) {
	for url, ok := range map[string]bool{
		"oci://127.0.0.1:5000/a":   true,
		"oci://localhost:5000/a":   true,
		"oci://[::1]:5000/a":       true,
		"oci://10.0.0.1:5000/a":    false,
		"oci://registry.example/a": false,
		"oci://127.0.0.1.nip.io/a": false,
	} {
		_, err := New(Config{URL: url, CacheDir: t.TempDir(), OCI: OCIOptions{Insecure: true}})
		if (err == nil) != ok {
			t.Errorf("New(%s, insecure) = %v, want ok %v", url, err, ok)
		}
		if !ok && err != nil && !strings.Contains(err.Error(), "loopback") {
			t.Errorf("New(%s, insecure): %v, want it to say loopback", url, err)
		}
	}
}

// TestOCIFailures: a registry down or failing is unavailable, a redirect
// of a blob goes without the credentials, and a pull that outlives its
// context stops.
func TestOCIFailures(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a registry")
	}
	const user, pass = "deployer", "s3cret-Pa55word"
	reg := testenv.StartRegistry(t, testenv.RegistryOptions{Front: true, Users: map[string]string{user: pass}})
	d := reg.PushFluxArtifact(t, "apps/a", "v1", map[string]string{"a.yaml": ociCM("a", "1")})
	creds := reg.DockerConfig(t, user, pass)

	// Blobs redirected to another origin: fetched, without credentials.
	reg.RedirectBlobs()
	s := ociSourceFor(t, reg, "apps/a", "v1", func(c *Config) { c.OCI.CredentialsFile = creds })
	if rev := mustFetch(t, s); rev.SHA != d {
		t.Fatalf("fetch %+v", rev)
	}
	if reg.RedirectHits() == 0 {
		t.Fatal("the blob was not fetched from the redirect")
	}
	if reg.RedirectSawAuth() {
		t.Fatal("the registry's credentials were sent to the redirect's origin")
	}

	for _, code := range []int{500, 502, 503, 429} {
		reg.Fail(code)
		_, err := s.Fetch(context.Background())
		if reasonOfErr(err) != ReasonUnavailable {
			t.Errorf("registry answering %d: %v (reason %q), want unavailable", code, err, reasonOfErr(err))
		}
	}
	reg.Fail(504)
	if _, err := s.Fetch(context.Background()); reasonOfErr(err) != ReasonTimeout {
		t.Errorf("registry answering 504: %v (reason %q), want timeout", err, reasonOfErr(err))
	}
	reg.Fail(0)
	reg.Stop()
	_, err := s.Fetch(context.Background())
	if reasonOfErr(err) != ReasonUnavailable {
		t.Errorf("registry down: %v (reason %q), want unavailable", err, reasonOfErr(err))
	}
	reg.Start()
	if _, err := s.Fetch(context.Background()); err != nil {
		t.Fatalf("fetch once the registry is back: %v", err)
	}

	// A registry that accepts and never answers: the fetch ends with its
	// context.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	hung := mustNew(t, Config{URL: "oci://" + ln.Addr().String() + "/apps/a", Ref: "v1", CacheDir: t.TempDir(), OCI: OCIOptions{Insecure: true}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = hung.Fetch(ctx)
	if reasonOfErr(err) != ReasonTimeout {
		t.Fatalf("fetch from a registry that never answers: %v (reason %q), want timeout", err, reasonOfErr(err))
	}
}
