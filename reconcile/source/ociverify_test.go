package source

import (
	"context"
	"os"
	"strings"
	"testing"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/reconcile/source/oci"
	"recond.dev/recond/reconcile/source/oci/cosign"
)

// verifyFixture holds what the real cosign made for
// TestOCIVerifyArtifacts: the repository apps/signed as an OCI image layout
// (oci/), whose artifacts legacy and bundle key a signed in both places
// cosign puts a signature, other key b signed, and unsigned and copied
// nobody did; and the public keys a.pub and b.pub.
// testdata/cosign-verify/generate.sh (make fixtures) makes it again.
const verifyFixture = "testdata/cosign-verify"

// TestOCIVerifyArtifacts reads artifacts the real cosign signed in a real
// registry, in both places it puts a signature, with --verify-artifacts:
// signed by a trusted key they are read; unsigned, signed by another key,
// or carrying a signature copied from another digest, the fetch fails with
// reason forbidden naming the digest (and the key, when the signature
// names it). A digest is checked once per keys file; another keys file
// checks it again.
func TestOCIVerifyArtifacts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a registry")
	}
	reg := testenv.StartRegistry(t, testenv.RegistryOptions{Front: true})
	const repo = "apps/signed"
	if testenv.UpdateFixtures() {
		writeVerifyFixture(t, reg, repo)
	}
	testenv.MadeByPinned(t, verifyFixture+"/cosign-version", "cosign", "github.com/sigstore/cosign/v2")
	tags := reg.Load(t, repo, verifyFixture+"/oci")
	pubA, pubB := verifyFixture+"/a.pub", verifyFixture+"/b.pub"
	idOf := func(pub string) string {
		b, err := os.ReadFile(pub)
		if err != nil {
			t.Fatal(err)
		}
		keys, err := cosign.ParseKeys(b)
		if err != nil {
			t.Fatal(err)
		}
		return keys[0].ID
	}
	legacy, unsigned, other, copied := tags["legacy"], tags["unsigned"], tags["other"], tags["copied"]
	for _, tag := range []string{"legacy", "bundle", "unsigned", "other", "copied"} {
		if tags[tag] == "" {
			t.Fatalf("%s/oci has no tag %s: make fixtures writes it", verifyFixture, tag)
		}
	}
	keys := writeFile(t, t.TempDir()+"/keys.pem", func() string {
		b, _ := os.ReadFile(pubA)
		return string(b)
	}())
	source := func(tag string) *Source {
		return ociSourceFor(t, reg, repo, tag, func(c *Config) { c.OCI.VerifyArtifacts, c.OCI.CosignKeysFile = true, keys })
	}
	for _, tag := range []string{"legacy", "bundle"} {
		s := source(tag)
		rev, err := s.Fetch(context.Background())
		if err != nil {
			t.Fatalf("fetch of the artifact signed by the trusted key (%s): %v", tag, err)
		}
		if got := mustRender(t, s, rev.SHA); len(got) != 1 || !strings.HasSuffix(got[0], "ConfigMap/a") {
			t.Fatalf("render %v", got)
		}
	}

	// A signature copied from legacy onto copied: the .sig tag of legacy,
	// tagged as copied's.
	s := source("legacy")
	ref, err := oci.ParseURL(s.DisplayURL())
	if err != nil {
		t.Fatal(err)
	}
	client, err := oci.New(ref, oci.Options{CAFile: reg.CAFile, Insecure: reg.CAFile == ""})
	if err != nil {
		t.Fatal(err)
	}
	repoClient, err := client.Repository()
	if err != nil {
		t.Fatal(err)
	}
	sig, err := repoClient.Resolve(context.Background(), "sha256-"+strings.TrimPrefix(legacy, "sha256:")+".sig")
	if err != nil {
		t.Fatal(err)
	}
	reg.Tag(t, repo, sig.Digest.String(), "sha256-"+strings.TrimPrefix(copied, "sha256:")+".sig")

	for _, tc := range []struct {
		tag, digest string
		want        []string
	}{
		{"unsigned", unsigned, []string{"no signature"}},
		{"other", other, []string{idOf(pubB)}},
		{"copied", copied, []string{}},
	} {
		_, err := source(tc.tag).Fetch(context.Background())
		if reasonOfErr(err) != ReasonForbidden || !strings.Contains(err.Error(), tc.digest) {
			t.Errorf("fetch of %s: %v (reason %q), want forbidden naming %s", tc.tag, err, reasonOfErr(err), tc.digest)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("fetch of %s: %v, want it to say %q", tc.tag, err, w)
			}
		}
		t.Logf("%s: %v", tc.tag, err)
	}

	// Checked once per digest: a second fetch is the HEAD alone.
	s = source("bundle")
	mustFetch(t, s)
	reg.ResetRequests()
	mustFetch(t, s)
	if got := reg.Requests(); len(got) != 1 {
		t.Errorf("a second fetch of a verified digest made requests %q, want the HEAD alone", got)
	}
	// The keys file changes (B only): checked again, and refused.
	b, _ := os.ReadFile(pubB)
	if err := os.WriteFile(keys, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Fetch(context.Background()); reasonOfErr(err) != ReasonForbidden {
		t.Errorf("fetch after the trusted key was removed: %v, want forbidden", err)
	}
}

// writeVerifyFixture pushes the plain artifacts legacy, bundle, unsigned,
// other and copied to repo, signs legacy (the .sig tag) and bundle (a
// bundle referrer) with key a and other with key b (an ed25519 key cosign
// imports) with the real cosign ($COSIGN_BIN), and writes the repository
// and the public keys into verifyFixture.
func writeVerifyFixture(t *testing.T, reg *testenv.Registry, repo string) {
	t.Helper()
	c := testenv.NewCosign(t)
	keyA, pubA := c.KeyPair("ecdsa-p256", "a")
	keyB, pubB := c.KeyPair("ed25519", "b")
	sign := func(key, digest string, bundle bool) {
		args := []string{"sign", "--key", key, "--tlog-upload=false", "--yes", "--allow-http-registry"}
		if bundle {
			args = append(args, "--new-bundle-format")
		}
		c.Run(append(args, reg.Host+"/"+repo+"@"+digest)...)
	}
	push := func(tag, value string) string {
		return reg.PushPlain(t, repo, tag, map[string]string{"a.yaml": ociCM("a", value)})
	}
	legacy, bundle, _, other, _ := push("legacy", "1"), push("bundle", "2"), push("unsigned", "3"), push("other", "4"), push("copied", "5")
	sign(keyA, legacy, false)
	sign(keyA, bundle, true)
	sign(keyB, other, true)
	if got := c.Escaped(); len(got) > 0 {
		t.Fatalf("cosign tried to reach beyond the registry: %q", got)
	}
	reg.Save(t, repo, verifyFixture+"/oci")
	for name, pub := range map[string]string{"a.pub": pubA, "b.pub": pubB} {
		b, err := os.ReadFile(pub)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, verifyFixture+"/"+name, string(b))
	}
	writeFile(t, verifyFixture+"/cosign-version", c.Version()+"\n")
}
