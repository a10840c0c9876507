package cosign

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote"

	"recond.dev/recond/internal/testenv"
)

// cliFixture holds what the real cosign made for TestCosignCLI: the
// repository apps/signed as an OCI image layout (oci/: one plain artifact
// per key kind and place, tagged KIND-legacy or KIND-bundle, and cosign's
// signatures of them), and the public keys (keys/KIND.pub, keys/other.pub).
// testdata/cosign-cli/generate.sh (make fixtures) makes it again.
const cliFixture = "testdata/cosign-cli"

// The key kinds cosign makes or imports, and the places it writes a
// signature: the legacy .sig tag, or an OCI 1.1 referrer holding a bundle.
var (
	cliKinds   = []string{"ecdsa-p256", "ecdsa-p384", "ed25519", "rsa-2048"}
	cliFormats = []string{"legacy", "bundle"}
)

// TestCosignCLI verifies what the real cosign signed in a real registry
// (distribution 2.8, without a referrers API), with keys of every kind it
// makes or imports, in both places: the signature verifies with its key,
// not with another one, and not once copied to another artifact. The
// repository cosign wrote is loaded as it was (cliFixture).
func TestCosignCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a registry")
	}
	reg := testenv.StartRegistry(t, testenv.RegistryOptions{})
	const repo = "apps/signed"
	if testenv.UpdateFixtures() {
		writeCLIFixture(t, reg, repo)
	}
	testenv.MadeByPinned(t, cliFixture+"/cosign-version", "cosign", "github.com/sigstore/cosign/v2")
	tags := reg.Load(t, repo, cliFixture+"/oci")
	ctx := t.Context()
	rep := reg.Repository(t, repo)
	otherKey := readKey(t, cliFixture+"/keys/other.pub")
	n := 0
	push := func() ocispec.Descriptor {
		t.Helper()
		n++
		d := reg.PushPlain(t, repo, "", map[string]string{"cm.yaml": fmt.Sprintf("kind: ConfigMap\nmetadata: {name: copy%d}\n", n)})
		desc, err := rep.Resolve(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		return desc
	}

	for _, kind := range cliKinds {
		key := readKey(t, cliFixture+"/keys/"+kind+".pub")
		for _, format := range cliFormats {
			bundle := format == "bundle"
			t.Run(kind+"/"+format, func(t *testing.T) {
				signed, ok := tags[kind+"-"+format]
				if !ok {
					t.Fatalf("%s/oci has no tag %s-%s: make fixtures writes it", cliFixture, kind, format)
				}
				target, err := rep.Resolve(ctx, signed)
				if err != nil {
					t.Fatal(err)
				}

				id, err := Verify(ctx, rep, target, []Key{otherKey, key})
				if err != nil || id != key.ID {
					t.Fatalf("Verify with the key = %q, %v; want %q", id, err, key.ID)
				}
				sigTag, err := rep.Resolve(ctx, legacyTag(target))
				if bundle != errors.Is(err, errdef.ErrNotFound) {
					t.Fatalf("signature tag %s: %v (bundle: %v)", legacyTag(target), err, bundle)
				}

				// Another key: the bundle's hint names the signer.
				wantID := ""
				if bundle {
					wantID = key.ID
				}
				_, err = Verify(ctx, rep, target, []Key{otherKey})
				var e *Error
				if !errors.Is(err, ErrUnknownKey) || !errors.As(err, &e) || e.KeyID != wantID {
					t.Fatalf("Verify with another key: %v; want ErrUnknownKey naming %q", err, wantID)
				}

				// The signature copied to another artifact.
				copied := push()
				if bundle {
					copyReferrer(t, rep, target, copied)
				} else {
					reg.Tag(t, repo, sigTag.Digest.String(), legacyTag(copied))
				}
				_, err = Verify(ctx, rep, copied, []Key{otherKey, key})
				if !errors.Is(err, ErrOtherDigest) || !errors.As(err, &e) || e.KeyID != key.ID {
					t.Fatalf("Verify of a copied signature: %v; want ErrOtherDigest by %s", err, key.ID)
				}
				t.Logf("copied: %v", err)

				if kind == "ecdsa-p256" {
					describe(t, rep, target, bundle)
				}
			})
		}
	}
}

// writeCLIFixture signs, with the real cosign ($COSIGN_BIN), one plain
// artifact of repo per key kind and place, with keys cosign makes
// (ecdsa-p256) or imports, and writes the repository and the public keys
// into cliFixture. cosign runs sealed: what it tries to reach beyond the
// registry fails the test, and the trap is shown to see such a request.
func writeCLIFixture(t *testing.T, reg *testenv.Registry, repo string) {
	t.Helper()
	c := testenv.NewCosign(t)
	keys := map[string]string{}
	_, keys["other"] = c.KeyPair("ecdsa-p256", "other")
	for _, kind := range cliKinds {
		var keyFile string
		keyFile, keys[kind] = c.KeyPair(kind, kind)
		for _, format := range cliFormats {
			tag := kind + "-" + format
			d := reg.PushPlain(t, repo, tag, map[string]string{"cm.yaml": "kind: ConfigMap\nmetadata: {name: " + tag + "}\n"})
			args := []string{"sign", "--key", keyFile, "--tlog-upload=false", "--yes", "--allow-http-registry"}
			if format == "bundle" {
				args = append(args, "--new-bundle-format")
			}
			out := c.Run(append(args, reg.Host+"/"+repo+"@"+d)...)
			t.Logf("cosign said:\n%s", out)
		}
	}
	if got := c.Escaped(); len(got) > 0 {
		t.Fatalf("cosign tried to reach beyond the registry: %q", got)
	}
	// The trap does see what would leave the machine: cosign initialize
	// fetches Sigstore's TUF root.
	if _, err := c.Try("initialize"); err == nil {
		t.Fatal("cosign initialize reached the TUF mirror through the trap")
	}
	if got := c.Escaped(); !slices.ContainsFunc(got, func(r string) bool { return strings.Contains(r, "sigstore.dev") }) {
		t.Fatalf("the proxy trap saw %q, want cosign initialize's request to sigstore.dev", got)
	}
	reg.Save(t, repo, cliFixture+"/oci")
	if err := os.MkdirAll(cliFixture+"/keys", 0o755); err != nil {
		t.Fatal(err)
	}
	for name, pub := range keys {
		data, err := os.ReadFile(pub)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cliFixture+"/keys/"+name+".pub", data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(cliFixture+"/cosign-version", []byte(c.Version()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// readKey reads a public key file as ParseKeys reads cosign's .pub.
func readKey(t *testing.T, path string) Key {
	t.Helper()
	pub, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: make fixtures writes it", err)
	}
	keys, err := ParseKeys(pub)
	if err != nil || len(keys) != 1 {
		t.Fatalf("ParseKeys(%s): %v, %d keys\n%s", path, err, len(keys), pub)
	}
	return keys[0]
}

// copyReferrer pushes a copy of from's bundle referrer whose subject is to
// (with oras-go, which updates the referrers tag schema's index).
func copyReferrer(t *testing.T, rep *remote.Repository, from, to ocispec.Descriptor) {
	t.Helper()
	ctx := t.Context()
	var refs []ocispec.Descriptor
	if err := rep.Referrers(ctx, from, "", func(page []ocispec.Descriptor) error {
		refs = append(refs, page...)
		return nil
	}); err != nil || len(refs) != 1 {
		t.Fatalf("referrers of %s: %v, %d", from.Digest, err, len(refs))
	}
	raw, err := content.FetchAll(ctx, rep, refs[0])
	if err != nil {
		t.Fatal(err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	m.Subject = &ocispec.Descriptor{MediaType: to.MediaType, Digest: to.Digest, Size: to.Size}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.Push(ctx, content.NewDescriptorFromBytes(m.MediaType, b), bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
}

// describe logs what cosign wrote for target, to document it.
func describe(t *testing.T, rep *remote.Repository, target ocispec.Descriptor, bundle bool) {
	t.Helper()
	ctx := t.Context()
	show := func(what string, d ocispec.Descriptor) []byte {
		b, err := content.FetchAll(ctx, rep, d)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		t.Logf("%s (%s, %s):\n%s", what, d.MediaType, d.Digest, b)
		return b
	}
	var tags []string
	if err := rep.Tags(ctx, "", func(page []string) error { tags = append(tags, page...); return nil }); err != nil {
		t.Fatal(err)
	}
	t.Logf("tags of the repository: %q", tags)
	var m ocispec.Manifest
	if !bundle {
		d, err := rep.Resolve(ctx, legacyTag(target))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(show("signature manifest "+legacyTag(target), d), &m); err != nil {
			t.Fatal(err)
		}
		show("payload", m.Layers[0])
		return
	}
	if err := rep.Referrers(ctx, target, "", func(page []ocispec.Descriptor) error {
		for _, d := range page {
			t.Logf("referrer listed: mediaType %s, artifactType %q, %s", d.MediaType, d.ArtifactType, d.Digest)
			if err := json.Unmarshal(show("referrer manifest", d), &m); err != nil {
				t.Fatal(err)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	show("bundle", m.Layers[0])
}
