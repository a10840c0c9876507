package main

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"recond.dev/recond/internal/testenv"
)

// TestOCISource runs recond against a real registry: the first sync
// applies the artifact at its digest (the revision in the annotations and
// the tick line), a converged tick of `recond run` makes one registry
// request (the HEAD) and no API request, a new push is applied, and the
// registry's credentials appear nowhere (logs, status page, spans); wrong ones
// fail the read with reason auth.
func TestOCISource(t *testing.T) {
	cp.Require(t)
	const user, pass = "deployer", "s3cret-Pa55word-oci"
	reg := testenv.StartRegistry(t, testenv.RegistryOptions{Front: true, Users: map[string]string{user: pass}})
	creds := reg.DockerConfig(t, user, pass)
	spansSent := collectOTLP(t)
	d1 := reg.PushFluxArtifact(t, "apps/web", "latest", map[string]string{"deploy/a.yaml": cmYAML})
	proxy := testenv.StartAPIProxy(t, cp.Config)
	ns := cp.Namespace(t)
	args := []string{"--repo", "oci://" + reg.Host + "/apps/web", "--ref", "latest", "--path", "deploy", "--oci-insecure",
		"--oci-credentials-file", creds, "--namespace", ns, "--kubeconfig", proxy.KubeConfig(t), "--log-format", "json",
		"--cache-dir", t.TempDir(), "--leader-elect=false"}
	ctx := context.Background()

	code, _, errOut := recond(t, append([]string{"sync"}, args...)...)
	if code != 0 {
		t.Fatalf("sync: exit %d", code)
	}
	cm, err := cp.Client.CoreV1().ConfigMaps(ns).Get(ctx, "c", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := cm.Annotations["recond.dev/revision"]; got != d1 {
		t.Fatalf("revision annotation %q, want the digest %s", got, d1)
	}
	if line := tickLine(errOut); !strings.Contains(line, `"revision":"`+d1[:19]+`"`) {
		t.Fatalf("the tick line does not carry the digest %s:\n%s", d1, line)
	}
	all := errOut

	// recond run: once converged, a tick is one HEAD and no API request.
	r := startRun(t, "300ms", true, args...)
	ticks := regexp.MustCompile(`"msg":"tick"`)
	waitTicks := func(n int) {
		t.Helper()
		start := len(ticks.FindAllString(r.log.String(), -1))
		waitUntil(t, r.log, func(log string) bool { return len(ticks.FindAllString(log, -1)) >= start+n })
	}
	waitTicks(2)
	reg.ResetRequests()
	apiBefore, ticksBefore := proxy.Requests(), len(ticks.FindAllString(r.log.String(), -1))
	waitTicks(3)
	apiAfter, ticksAfter := proxy.Requests(), len(ticks.FindAllString(r.log.String(), -1))
	heads := 0
	for _, req := range reg.Requests() {
		if req != "HEAD /v2/apps/web/manifests/latest" {
			t.Errorf("a converged tick made the registry request %q", req)
		}
		heads++
	}
	// The window may cut a tick in two: at most one HEAD per tick, at
	// least one per tick that ran whole inside it.
	if n := ticksAfter - ticksBefore; heads < n-1 || heads > n+1 {
		t.Errorf("%d converged ticks made %d registry requests, want one HEAD each", n, heads)
	}
	if apiAfter != apiBefore {
		t.Errorf("%d converged ticks made %d API requests, want none", ticksAfter-ticksBefore, apiAfter-apiBefore)
	}

	// A new push is applied at its digest.
	d2 := reg.PushFluxArtifact(t, "apps/web", "latest", map[string]string{"deploy/a.yaml": strings.Replace(cmYAML, "k: v", "k: v2", 1)})
	waitUntil(t, r.log, func(log string) bool { return strings.Contains(log, `"revision":"`+d2[:19]+`"`) })
	waitTicks(1)
	cm, err = cp.Client.CoreV1().ConfigMaps(ns).Get(ctx, "c", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["k"] != "v2" || cm.Annotations["recond.dev/revision"] != d2 {
		t.Fatalf("after a push: data %v, revision %q; want v2 at %s", cm.Data, cm.Annotations["recond.dev/revision"], d2)
	}
	pages := statusPages(t, r.addr, 2)
	if !strings.Contains(pages, d2[:19]) {
		t.Errorf("the status page does not show the digest %s", d2[:19])
	}
	all += pages + r.log.String()

	// Wrong credentials: the read fails with reason auth.
	code, _, errOut = recond(t, append([]string{"sync"}, append(args, "--oci-credentials-file", reg.DockerConfig(t, user, "wrong"))...)...)
	line := tickLine(errOut)
	if code != 1 || !strings.Contains(line, `"phase":"read"`) || !strings.Contains(line, `"reason":"auth"`) {
		t.Errorf("sync with wrong credentials: exit %d, tick line %s; want 1, read, auth", code, line)
	}
	r.stop()
	all += errOut + spansSent()
	if !strings.Contains(spansSent(), "recond.git.fetch") {
		t.Error("no span was exported")
	}
	if strings.Contains(all, pass) {
		t.Error("the registry's password appears in recond's output (logs, status page or spans)")
	}
}

// waitUntil polls log until cond holds of it (for up to two minutes, a
// guard against a hang).
func waitUntil(t *testing.T, log *testenv.SyncBuffer, cond func(string) bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond(log.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting; log:\n%s", log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// signedFixture holds what the real cosign made for TestOCISignedArtifacts:
// the repository apps/web as an OCI image layout (oci/), whose tag prod is
// a Flux artifact of cmYAML signed with the key release.pub.
// testdata/cosign-signed/generate.sh (make fixtures) makes it again.
const signedFixture = "testdata/cosign-signed"

// TestOCISignedArtifacts: with --verify-artifacts, an artifact signed by
// the real cosign with a trusted key (signedFixture) is applied; an
// unsigned push of the same tag fails the read with reason forbidden,
// naming the digest, and what was applied stays.
func TestOCISignedArtifacts(t *testing.T) {
	reg := testenv.StartRegistry(t, testenv.RegistryOptions{})
	if testenv.UpdateFixtures() {
		writeSignedFixture(t, reg)
	}
	testenv.MadeByPinned(t, signedFixture+"/cosign-version", "cosign", "github.com/sigstore/cosign/v2")
	d1 := reg.Load(t, "apps/web", signedFixture+"/oci")["prod"]
	pub := signedFixture + "/release.pub"
	ns := cp.Namespace(t)
	args := []string{"sync", "--repo", "oci://" + reg.Host + "/apps/web", "--ref", "prod", "--oci-insecure",
		"--verify-artifacts", "--cosign-keys-file", pub, "--namespace", ns, "--kubeconfig", cp.WriteKubeConfig(t),
		"--log-format", "json", "--cache-dir", t.TempDir(), "--leader-elect=false"}
	if code, _, _ := recond(t, args...); code != 0 {
		t.Fatalf("sync of a signed artifact: exit %d", code)
	}
	d2 := reg.PushFluxArtifact(t, "apps/web", "prod", map[string]string{"a.yaml": strings.Replace(cmYAML, "k: v", "k: unsigned", 1)})
	code, _, errOut := recond(t, args...)
	line := tickLine(errOut)
	if code != 1 || !strings.Contains(line, `"phase":"read"`) || !strings.Contains(line, `"reason":"forbidden"`) || !strings.Contains(line, d2) {
		t.Fatalf("sync of an unsigned artifact: exit %d, tick line %s; want 1, read, forbidden, naming %s", code, line, d2)
	}
	cm, err := cp.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "c", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["k"] != "v" || cm.Annotations["recond.dev/revision"] != d1 {
		t.Fatalf("after the refusal: data %v at %q; want what was applied at %s", cm.Data, cm.Annotations["recond.dev/revision"], d1)
	}
}

// writeSignedFixture pushes cmYAML as a Flux artifact apps/web:prod, signs
// it with the real cosign ($COSIGN_BIN) and a key it makes, and writes the
// repository and the public key into signedFixture.
func writeSignedFixture(t *testing.T, reg *testenv.Registry) {
	t.Helper()
	c := testenv.NewCosign(t)
	key, pub := c.KeyPair("ecdsa-p256", "release")
	d := reg.PushFluxArtifact(t, "apps/web", "prod", map[string]string{"a.yaml": cmYAML})
	c.Run("sign", "--key", key, "--tlog-upload=false", "--yes", "--allow-http-registry", reg.Host+"/apps/web@"+d)
	if got := c.Escaped(); len(got) > 0 {
		t.Fatalf("cosign tried to reach beyond the registry: %q", got)
	}
	reg.Save(t, "apps/web", signedFixture+"/oci")
	b, err := os.ReadFile(pub)
	if err == nil {
		err = os.WriteFile(signedFixture+"/release.pub", b, 0o644)
	}
	if err == nil {
		err = os.WriteFile(signedFixture+"/cosign-version", []byte(c.Version()+"\n"), 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
}
