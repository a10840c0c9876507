package reconcile_test

import (
	"fmt"
	"strings"
	"testing"

	"recond.dev/recond/reconcile"
	"recond.dev/recond/reconcile/health"
)

// A Secret with plain text under data (not base64) is an invalid manifest,
// refused before anything is sent (the API server answers it with a 500,
// which read as unavailable sent the runbook to the API server): reason
// invalid, the Secret and the key named, the value nowhere, nothing
// written.
func TestSecretDataNotBase64IsInvalid(t *testing.T) {
	const value = "Hunter2-is-plain-text!"
	h := newHarness(t)
	h.repo.Commit("app", app())
	h.mustTick(reconcile.OutcomeApplied)
	h.repo.Commit("secret", map[string]string{
		"configmap.yaml": strings.Replace(configMapYAML, "hello", "changed", 1),
		"secret.yaml":    "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ndata:\n  user: YWRtaW4=\n  password: " + value + "\n",
	})
	r := h.tick()
	expectFailure(t, r, reconcile.PhaseApply, reconcile.ReasonInvalid, "Secret/db", "data.password", "stringData")
	if len(r.Rejected) != 1 || r.Rejected[0].Kind != "Secret" || r.Rejected[0].Name != "db" {
		t.Fatalf("rejected %+v, want Secret/db", r.Rejected)
	}
	// The log, the Event and the page (FailureText, ErrorText) name the
	// Secret and the key; none shows the value.
	for where, text := range map[string]string{"failure": r.Failure().Error(), "failure text": r.FailureText(),
		"rejected": r.Rejected[0].ErrorText()} {
		if strings.Contains(text, value) {
			t.Errorf("the %s shows the Secret's value: %s", where, text)
		}
		if !strings.Contains(text, "Secret/db: data.password is not base64") {
			t.Errorf("the %s does not name the Secret and the key: %s", where, text)
		}
	}
	if h.get(gvrSecret, "db") != nil {
		t.Error("the Secret was written")
	}
	if h.get(gvrConfigMap, "web-config").Object["data"].(map[string]any)["greeting"] != "hello" {
		t.Error("the ConfigMap was written although the Secret was refused")
	}
}

// frozen is an immutable ConfigMap whose value is v.
func frozen(i int, v string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: frozen-%d\nimmutable: true\ndata:\n  k: %s\n", i, v)
}

// Every object the validating dry runs refuse is named, not only the
// first: three immutable ConfigMaps changed in one commit fail one tick
// that names all three, in its failure and in Rejected (what
// /api/v1/ticks/N serves as rejected).
func TestEveryRejectedObjectIsNamed(t *testing.T) {
	h := newHarness(t)
	files := map[string]string{}
	for i := range 3 {
		files[fmt.Sprintf("frozen-%d.yaml", i)] = frozen(i, "one")
	}
	h.repo.Commit("frozen", files)
	h.mustTick(reconcile.OutcomeApplied)
	for i := range 3 {
		files[fmt.Sprintf("frozen-%d.yaml", i)] = frozen(i, "two")
	}
	h.repo.Commit("thaw all three", files)
	r := h.tick()
	// An immutable ConfigMap's data cannot change once set: reason immutable.
	expectFailure(t, r, reconcile.PhaseApply, reconcile.ReasonImmutable, "nothing written", "3 objects refused", "frozen-0", "frozen-1", "frozen-2")
	var names []string
	for _, op := range r.Rejected {
		if op.Err == nil {
			t.Errorf("rejected %s/%s without its error", op.Kind, op.Name)
		}
		names = append(names, op.Kind+"/"+op.Name)
	}
	if got := strings.Join(names, ","); got != "ConfigMap/frozen-0,ConfigMap/frozen-1,ConfigMap/frozen-2" {
		t.Errorf("rejected %s, want the three ConfigMaps", got)
	}
}

// A ResourceQuota the dry runs cannot see (each dry run is one object
// against the quota; the writes add up) refuses the writes past it: the
// apply writes what the quota allows, goes on through the wave so that
// every refused object is named, writes and prunes nothing after it, and
// says so: written=6 refused=5 on the tick line, the counts in the Result,
// the five missing objects counted missing by health, and the instance not
// healthy.
func TestQuotaRefusalIsAPartialApply(t *testing.T) {
	h := newHarness(t)
	logs := h.logged()
	h.repo.Commit("app", map[string]string{"configmap.yaml": configMapYAML, "service.yaml": serviceYAML})
	h.mustTick(reconcile.OutcomeApplied)
	used := h.countConfigMaps()
	h.setQuota(used+6, used)

	files := map[string]string{"service.yaml": ""} // removed in the same commit
	for i := range 11 {
		files[fmt.Sprintf("cm-%02d.yaml", i)] = fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%02d\ndata:\n  k: v\n", i)
	}
	h.repo.Commit("eleven more", files)
	r := h.tick()
	f := r.Failure()
	if r.Outcome != reconcile.OutcomeFailed || f == nil || f.Phase != reconcile.PhaseApply || f.Reason != reconcile.ReasonForbidden {
		t.Fatalf("outcome %s, failure %v; want failed in apply (forbidden)", r.Outcome, f)
	}
	if c := r.Counts; c.Created != 6 || c.Refused != 5 || c.NotWritten != 1 || c.Pruned != 0 || !r.Partial() {
		t.Errorf("counts %+v (partial %v), want 6 created, 5 refused, 1 not written (the prune), 0 pruned", c, r.Partial())
	}
	for i := 6; i < 11; i++ {
		name := fmt.Sprintf("cm-%02d", i)
		if !strings.Contains(f.Error(), name) {
			t.Errorf("the failure does not name %s: %v", name, f)
		}
		if h.get(gvrConfigMap, name) != nil {
			t.Errorf("%s exists", name)
		}
	}
	if !strings.Contains(f.Error(), "exceeded quota") || !strings.Contains(f.Error(), "6 object(s) written, 5 refused") {
		t.Errorf("failure %q does not say what was written and refused", f)
	}
	if h.get(gvrService, "web") == nil {
		t.Error("the Service removed in the same commit was pruned by a partial apply")
	}
	if got := r.Health.Counts[health.Missing]; got != 5 || r.Health.Status == health.Healthy {
		t.Errorf("health %s with %d missing (counts %v), want 5 missing and not healthy", r.Health.Status, got, r.Health.Counts)
	}
	if !strings.Contains(objectHealth(t, r, "ConfigMap", "cm-10").Message, "not in the cluster") {
		t.Errorf("cm-10's health: %+v", objectHealth(t, r, "ConfigMap", "cm-10"))
	}
	if logs.count("written=6 refused=5 not_written=1 partial=true") != 1 {
		t.Errorf("no tick line says written=6 refused=5")
	}

	// Room again: the next tick writes the rest and prunes.
	h.setQuota(used+12, used+6)
	r = h.mustTick(reconcile.OutcomeApplied)
	if c := r.Counts; c.Created != 5 || c.Pruned != 1 || c.Refused != 0 || r.Partial() || r.Health.Counts[health.Missing] != 0 {
		t.Errorf("after the quota was raised: counts %+v, health %v", c, r.Health.Counts)
	}
}
