package reconcile_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/reconcile"
	"recond.dev/recond/reconcile/cluster"
	"recond.dev/recond/reconcile/source"
	"recond.dev/recond/reconcile/source/renderer"
)

// pgpKey makes an OpenPGP key pair (Ed25519, which is quick to generate).
func pgpKey(t *testing.T, name string) *openpgp.Entity {
	t.Helper()
	e, err := openpgp.NewEntity(name, "", strings.ToLower(name)+"@example.com", &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// trustKeys writes the armored public keys to a file and returns its path.
func trustKeys(t *testing.T, keys ...*openpgp.Entity) string {
	t.Helper()
	var b bytes.Buffer
	w, err := armor.Encode(&b, openpgp.PublicKeyType, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if err := k.Serialize(w); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "trusted.asc")
	if err := os.WriteFile(file, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// signedCommit commits files into the repository at dir ("signed"),
// signed with key (unsigned when nil): an empty content removes the file.
func signedCommit(t *testing.T, dir string, key *openpgp.Entity, files map[string]string) string {
	t.Helper()
	return testenv.OpenRepo(t, dir).CommitSigned("signed", key, files)
}

// verifyingReconciler is harness.reconciler with --verify-commits on.
func (h *harness) verifyingReconciler(keysFile string) {
	h.t.Helper()
	src, err := source.New(source.Config{Renderer: renderer.InProcess{}, URL: h.url, Path: h.cfg.Path, CacheDir: h.t.TempDir(), VerifyCommits: true, TrustedKeysFile: keysFile})
	if err != nil {
		h.t.Fatal(err)
	}
	kube, err := cluster.New(h.rest, h.ns)
	if err != nil {
		h.t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(testWriter{h.t}, nil))
	h.rec = reconcile.New(h.cfg, src, kube, log, reconcile.LogObserver{Log: log})
}

func TestOnlyTrustedCommitsAreApplied(t *testing.T) {
	trusted, stranger := pgpKey(t, "Trusted"), pgpKey(t, "Stranger")
	cases := []struct {
		name   string
		http   bool
		signer *openpgp.Entity // of the untrusted commit
		says   string
	}{
		{"file unknown key", false, stranger, fmt.Sprintf("signed by key %016X which is not in --trusted-keys-file", stranger.PrimaryKey.KeyId)},
		{"file unsigned", false, nil, "is unsigned"},
		{"http unknown key", true, stranger, fmt.Sprintf("signed by key %016X which is not in --trusted-keys-file", stranger.PrimaryKey.KeyId)},
		{"http unsigned", true, nil, "is unsigned"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			if tc.http {
				h.url = h.repo.ServeHTTP(t, nil)
			}
			h.verifyingReconciler(trustKeys(t, trusted))

			good := signedCommit(t, h.repo.Dir, trusted, app())
			if r := h.mustTick(reconcile.OutcomeApplied); r.Revision != good {
				t.Fatalf("applied revision %s, want %s", r.Revision, good)
			}
			inventory := h.get(gvrConfigMap, reconcile.InventoryPrefix+h.cfg.Name)
			if inventory == nil {
				t.Fatal("no inventory after the first sync")
			}

			// The untrusted commit changes the ConfigMap and drops the Service.
			bad := signedCommit(t, h.repo.Dir, tc.signer, map[string]string{
				"configmap.yaml": strings.Replace(configMapYAML, "hello", "hijacked", 1),
				"service.yaml":   "",
			})
			for i := range 2 { // the second time the commit is already cached
				r := h.tick()
				expectFailure(t, r, reconcile.PhaseRead, reconcile.ReasonForbidden, "commit "+bad[:12], tc.says)
				if r.Revision != "" {
					t.Errorf("tick %d: revision %q reported for a refused commit", i, r.Revision)
				}
			}
			if h.get(gvrService, "web") == nil {
				t.Error("an untrusted commit pruned the service")
			}
			live := h.get(gvrConfigMap, "web-config")
			if g, _, _ := unstructured.NestedString(live.Object, "data", "greeting"); g != "hello" {
				t.Errorf("an untrusted commit was applied: greeting %q, want %q", g, "hello")
			}
			if rev := live.GetAnnotations()["recond.dev/revision"]; rev != good {
				t.Errorf("live revision annotation %s, want the trusted %s", rev, good)
			}
			if inv := h.get(gvrConfigMap, reconcile.InventoryPrefix+h.cfg.Name); inv.GetResourceVersion() != inventory.GetResourceVersion() {
				t.Errorf("inventory rewritten by a refused tick: resourceVersion %s -> %s", inventory.GetResourceVersion(), inv.GetResourceVersion())
			}

			// A trusted commit on top recovers; only the tip is checked.
			fix := signedCommit(t, h.repo.Dir, trusted, map[string]string{
				"configmap.yaml": strings.Replace(configMapYAML, "hello", "welcome back", 1),
				"service.yaml":   serviceYAML,
			})
			if r := h.mustTick(reconcile.OutcomeApplied); r.Revision != fix {
				t.Errorf("applied revision %s, want %s", r.Revision, fix)
			}
			if g, _, _ := unstructured.NestedString(h.get(gvrConfigMap, "web-config").Object, "data", "greeting"); g != "welcome back" {
				t.Errorf("greeting %q after the trusted fix, want %q", g, "welcome back")
			}
			h.mustTick(reconcile.OutcomeConverged)
		})
	}
}
