package reconcile_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/reconcile"
)

// A revision's SOPS files are decrypted once: while the revision does not
// move, ticks reuse its render, whatever the keys file says since; a manual
// tick renders it again when the keys file changed (here to a key that
// cannot open it: the tick fails read with reason auth), and the next tick
// with the right key converges.
func TestDecryptOncePerRevisionKeysOnDemand(t *testing.T) {
	s := testenv.NewSOPS(t)
	good, recipient := s.Keygen()
	wrong, _ := s.Keygen()
	h := newHarness(t)
	h.sopsKeys = s.KeysFile(good)
	secret := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: hunter2-sops\n"
	files := app()
	files["secret.yaml"] = string(s.Encrypt("secret.yaml", []byte(secret), "--age", recipient, "--encrypted-regex", "^(data|stringData)$"))
	h.repo.Commit("app", files)
	h.mustTick(reconcile.OutcomeApplied)
	if got := h.get(gvrSecret, "db").Object["data"].(map[string]any)["password"]; got != "aHVudGVyMi1zb3Bz" {
		t.Fatalf("the Secret holds %v, not the decrypted value", got)
	}

	setKeys := func(id string) {
		t.Helper()
		if err := os.WriteFile(h.sopsKeys, []byte(id+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tickFor := func(why reconcile.Trigger) *reconcile.Result {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return h.reconciler().TickFor(ctx, why)
	}
	setKeys(wrong)
	if r := tickFor(reconcile.TriggerInterval); r.Outcome != reconcile.OutcomeConverged {
		t.Fatalf("an interval tick at the same revision: %s (%v), want converged from the kept render", r.Outcome, r.Failure())
	}
	r := tickFor(reconcile.TriggerManual)
	f := r.Failure()
	if r.Outcome != reconcile.OutcomeFailed || f == nil || f.Phase != reconcile.PhaseRead || f.Reason != reconcile.ReasonAuth {
		t.Fatalf("a manual tick after the keys changed: %s (%v), want a read failure with reason auth", r.Outcome, f)
	}
	if !strings.Contains(f.Err.Error(), "secret.yaml") || !strings.Contains(f.Err.Error(), recipient) {
		t.Errorf("the failure does not name the file and its recipient: %v", f.Err)
	}
	setKeys(good)
	if r := tickFor(reconcile.TriggerInterval); r.Outcome != reconcile.OutcomeConverged {
		t.Fatalf("with the right key again: %s (%v), want converged", r.Outcome, r.Failure())
	}
}

// A decrypted value in an object's name is refused (names are shown
// everywhere), and no error of the read phase quotes one (here recond's
// own, about an opt-out annotation's value): the tick fails with reason
// invalid, naming the file, and its text holds no value.
func TestDecryptedValueInNamesAndErrors(t *testing.T) {
	s := testenv.NewSOPS(t)
	id, recipient := s.Keygen()
	const value = "hunter2-sops-long"
	secret := string(s.Encrypt("secret.yaml", []byte("apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: "+value+"\n"),
		"--age", recipient, "--encrypted-regex", "^(data|stringData)$"))
	cm := func(name, ann string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n  annotations: {" + ann + "}\ndata: {a: b}\n"
	}
	tests := []struct {
		name string
		cm   string
		says string
	}{
		{"a name that holds a decrypted value", cm("app-"+value, ""), "holds a value recond decrypted"},
		{"an opt-out annotation's value that holds one", cm("app", "recond.dev/apply: "+value), "<redacted>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.sopsKeys = s.KeysFile(id)
			h.repo.Commit("app", map[string]string{"secret.yaml": secret, "cm.yaml": tt.cm})
			r := h.tick()
			f := r.Failure()
			if r.Outcome != reconcile.OutcomeFailed || f == nil || f.Phase != reconcile.PhaseRead || f.Reason != reconcile.ReasonInvalid {
				t.Fatalf("outcome %s (%v), want a read failure with reason invalid", r.Outcome, f)
			}
			if !strings.Contains(f.Err.Error(), "cm.yaml") || !strings.Contains(f.Err.Error(), tt.says) {
				t.Errorf("the failure does not name cm.yaml and say %q: %v", tt.says, f.Err)
			}
			if strings.Contains(fmt.Sprintf("%v %+v", f, r.FailureText()), value) {
				t.Errorf("the failure quotes the decrypted value: %v", f)
			}
		})
	}
}
