package reconcile_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"recond.dev/recond/reconcile"
	"recond.dev/recond/reconcile/health"
)

// cmWith is a ConfigMap named name with annotations ann and data k: v.
func cmWith(name, v string, ann map[string]string) string {
	s := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + quote(name) + "\n"
	if len(ann) > 0 {
		s += "  annotations:\n"
		for k, a := range ann {
			s += "    " + k + ": " + quote(a) + "\n"
		}
	}
	return s + "data:\n  k: " + quote(v) + "\n"
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

// patchAs merge-patches an object as another field manager would.
func (h *harness) patchAs(t *testing.T, gvr schema.GroupVersionResource, name, patch string) {
	t.Helper()
	if _, err := h.dyn.Resource(gvr).Namespace(h.ns).Patch(context.Background(), name, types.MergePatchType, []byte(patch),
		metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) data(t *testing.T, name string) map[string]any {
	t.Helper()
	cm := h.get(gvrConfigMap, name)
	if cm == nil {
		return nil
	}
	d, _ := cm.Object["data"].(map[string]any)
	return d
}

func skipped(r *reconcile.Result) []string {
	var out []string
	for _, s := range r.Skipped {
		out = append(out, s.String())
	}
	return out
}

// recond.dev/reconcile: disabled, in Git: never created, listed as skipped
// at every tick; on a live object (kubectl annotate): neither healed nor
// pruned when it leaves Git. Without the opt-out (State.optOuts) the first
// sync creates it and the drift is healed.
func TestReconcileDisabled(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit("app", map[string]string{
		"off.yaml": cmWith("off", "v", map[string]string{reconcile.AnnotationReconcile: "disabled"}),
		"on.yaml":  cmWith("on", "v", nil),
	})
	r := h.mustTick(reconcile.OutcomeApplied)
	if h.get(gvrConfigMap, "off") != nil {
		t.Fatal("a ConfigMap with recond.dev/reconcile: disabled was created")
	}
	if got := strings.Join(skipped(r), " "); got != "ConfigMap/off (reconcile_disabled)" || r.Counts.Skipped != 1 {
		t.Errorf("skipped %q (count %d)", got, r.Counts.Skipped)
	}
	if r.Health == nil || r.Health.Counts[health.Missing] != 0 {
		t.Errorf("health %+v: a disabled object that is not there counts as missing", r.Health)
	}
	// Disabled on the live object: a manual change stays, and so does
	// the object when it leaves Git.
	h.patchAs(t, gvrConfigMap, "on", `{"metadata":{"annotations":{"`+reconcile.AnnotationReconcile+`":"disabled"}},"data":{"k":"by hand"}}`)
	r = h.mustTick(reconcile.OutcomeConverged)
	if got := h.data(t, "on")["k"]; got != "by hand" {
		t.Errorf("a live object with recond.dev/reconcile: disabled was healed: k = %v", got)
	}
	h.repo.Commit("on leaves Git", map[string]string{"on.yaml": ""})
	r = h.mustTick(reconcile.OutcomeConverged)
	if h.get(gvrConfigMap, "on") == nil {
		t.Fatalf("a live object with recond.dev/reconcile: disabled was pruned")
	}
	if got := strings.Join(skipped(r), " "); !strings.Contains(got, "ConfigMap/on (reconcile_disabled)") {
		t.Errorf("skipped %q: the live object is not listed", got)
	}
}

// recond.dev/apply: create-only: created when missing, never updated (a
// change in Git, drift by another manager), created again when deleted.
func TestCreateOnly(t *testing.T) {
	h := newHarness(t)
	once := map[string]string{reconcile.AnnotationApply: "create-only"}
	h.repo.Commit("app", map[string]string{"seed.yaml": cmWith("seed", "first", once)})
	h.mustTick(reconcile.OutcomeApplied)
	h.repo.Commit("change", map[string]string{"seed.yaml": cmWith("seed", "second", once)})
	h.patchAs(t, gvrConfigMap, "seed", `{"data":{"filled":"by an operator"}}`)
	r := h.mustTick(reconcile.OutcomeConverged)
	if d := h.data(t, "seed"); d["k"] != "first" || d["filled"] != "by an operator" {
		t.Errorf("a create-only object was updated: %v", d)
	}
	if got := strings.Join(skipped(r), " "); got != "ConfigMap/seed (create_only)" {
		t.Errorf("skipped %q, want the update not made", got)
	}
	if err := h.dyn.Resource(gvrConfigMap).Namespace(h.ns).Delete(context.Background(), "seed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.mustTick(reconcile.OutcomeApplied)
	if d := h.data(t, "seed"); d["k"] != "second" {
		t.Errorf("recreated with %v, want Git's second", d)
	}
}

// recond.dev/prune: disabled: an object that leaves Git is not deleted but
// orphaned (recond's labels removed), and the next ticks leave it alone.
// Without it (the diff's prune_disabled branch) the object is pruned.
func TestPruneDisabled(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit("app", map[string]string{
		"keep.yaml":  cmWith("keep", "v", map[string]string{reconcile.AnnotationPrune: "disabled"}),
		"other.yaml": cmWith("other", "v", nil),
	})
	h.mustTick(reconcile.OutcomeApplied)
	h.repo.Commit("keep leaves Git", map[string]string{"keep.yaml": ""})
	r := h.mustTick(reconcile.OutcomeApplied)
	cm := h.get(gvrConfigMap, "keep")
	if cm == nil {
		t.Fatal("an object with recond.dev/prune: disabled was deleted")
	}
	if l := cm.GetLabels(); l[reconcile.LabelInstance] != "" || l[reconcile.LabelManagedBy] != "" {
		t.Errorf("orphaned object keeps recond's labels: %v", l)
	}
	if r.Counts.Orphaned != 1 || len(r.Orphaned) != 1 || r.Orphaned[0].Name != "keep" || r.Counts.Pruned != 0 {
		t.Errorf("orphaned %v (count %d), pruned %d", r.Orphaned, r.Counts.Orphaned, r.Counts.Pruned)
	}
	if got := strings.Join(skipped(r), " "); got != "ConfigMap/keep (prune_disabled)" {
		t.Errorf("skipped %q", got)
	}
	r = h.mustTick(reconcile.OutcomeConverged)
	if h.get(gvrConfigMap, "keep") == nil || r.Counts.Orphaned != 0 {
		t.Errorf("the tick after: object %v, orphaned %d", h.get(gvrConfigMap, "keep") != nil, r.Counts.Orphaned)
	}
}

// recond.dev/ignore-fields: the fields are neither compared nor sent:
// another manager owns them, and a change to them in Git is not applied.
// Without it (optout.Check's removal) the other manager's value is healed.
func TestIgnoreFields(t *testing.T) {
	h := newHarness(t)
	dep := strings.Replace(deploymentYAML, "  labels:\n    app: web\n", "  labels:\n    app: web\n  annotations:\n    "+reconcile.AnnotationIgnoreFields+": /spec/replicas\n", 1)
	if dep == deploymentYAML {
		t.Fatal("fixture: no place for the annotation")
	}
	h.repo.Commit("app", map[string]string{"deployment.yaml": dep,
		"cm.yaml": cmWith("gen", "v", map[string]string{reconcile.AnnotationIgnoreFields: "/data/generated"})})
	r := h.mustTick(reconcile.OutcomeApplied)
	if got := strings.Join(skipped(r), " "); !strings.Contains(got, "Deployment/web (ignore_fields: /spec/replicas)") || !strings.Contains(got, "ConfigMap/gen (ignore_fields: /data/generated)") {
		t.Errorf("skipped %q", got)
	}
	// Another manager (an autoscaler, a generator) owns the fields.
	h.patchAs(t, gvrDeployment, "web", `{"spec":{"replicas":7}}`)
	h.patchAs(t, gvrConfigMap, "gen", `{"data":{"generated":"s3"}}`)
	h.repo.Commit("replicas in Git", map[string]string{"deployment.yaml": strings.Replace(dep, "replicas: 2", "replicas: 4", 1)})
	h.mustTick(reconcile.OutcomeConverged)
	if got := h.replicas(); got != 7 {
		t.Errorf("replicas %d, want the other manager's 7", got)
	}
	if d := h.data(t, "gen"); d["generated"] != "s3" || d["k"] != "v" {
		t.Errorf("ConfigMap gen %v, want generated kept and k from Git", d)
	}
}

// An opt-out misspelt fails the read phase (reason invalid) naming the
// object and the annotation, and nothing is written.
func TestOptOutErrors(t *testing.T) {
	for _, tc := range []struct {
		name, key, value, says string
	}{
		{"unknown reconcile value", reconcile.AnnotationReconcile, "off", "recond.dev/reconcile"},
		{"unknown apply value", reconcile.AnnotationApply, "create-once", "recond.dev/apply"},
		{"unknown prune value", reconcile.AnnotationPrune, "never", "recond.dev/prune"},
		{"not a pointer", reconcile.AnnotationIgnoreFields, "spec.replicas", "JSON pointer"},
		{"the name", reconcile.AnnotationIgnoreFields, "/metadata/name", "identity"},
		{"recond's label", reconcile.AnnotationIgnoreFields, "/metadata/labels/recond.dev~1instance", "recond's own"},
		{"into a list", reconcile.AnnotationIgnoreFields, "/data/list/0", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			files := map[string]string{"bad.yaml": cmWith("bad", "v", map[string]string{tc.key: tc.value}), "ok.yaml": cmWith("ok", "v", nil)}
			if tc.name == "into a list" {
				files["bad.yaml"] = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: bad\n  annotations:\n    " + tc.key + ": /data/list/0\nstringData: {a: b}\n"
				h.repo.Commit("app", files)
				// A path that does not exist is no error (nothing to ignore).
				h.mustTick(reconcile.OutcomeApplied)
				return
			}
			h.repo.Commit("app", files)
			r := h.tick()
			f := r.Failure()
			if f == nil || f.Phase != reconcile.PhaseRead || f.Reason != reconcile.ReasonInvalid ||
				!strings.Contains(f.Error(), "ConfigMap/bad") || !strings.Contains(f.Error(), tc.says) {
				t.Fatalf("failure %v, want read invalid naming ConfigMap/bad and %q", f, tc.says)
			}
			if h.get(gvrConfigMap, "ok") != nil {
				t.Error("something was written")
			}
		})
	}
}

// Each opt-out through the life of an object: first sync, a change in Git,
// drift by another manager, removal from Git.
func TestOptOutLifecycles(t *testing.T) {
	type step struct {
		name    string
		files   map[string]string // commit (nil: none)
		drift   string            // merge patch by another manager on ConfigMap x ("": none)
		outcome reconcile.Outcome
		want    map[string]any // data of ConfigMap x; nil: it does not exist
	}
	for _, tc := range []struct {
		name  string
		ann   map[string]string
		steps []step
	}{
		{"reconcile disabled after the first sync", nil, []step{
			{"first sync", map[string]string{"x.yaml": cmWith("x", "1", nil)}, "", reconcile.OutcomeApplied, map[string]any{"k": "1"}},
			{"disabled and changed in Git: not written", map[string]string{"x.yaml": cmWith("x", "2", map[string]string{reconcile.AnnotationReconcile: "disabled"})}, "", reconcile.OutcomeConverged, map[string]any{"k": "1"}},
			{"drift: not healed", nil, `{"data":{"k":"hand"}}`, reconcile.OutcomeConverged, map[string]any{"k": "hand"}},
			{"removed from Git: the live object carries no opt-out, so it is pruned", map[string]string{"x.yaml": ""}, "", reconcile.OutcomeApplied, nil},
		}},
		{"create-only", map[string]string{reconcile.AnnotationApply: "create-only"}, []step{
			{"first sync", nil, "", reconcile.OutcomeApplied, map[string]any{"k": "1"}},
			{"changed in Git: not updated", map[string]string{"x.yaml": cmWith("x", "2", map[string]string{reconcile.AnnotationApply: "create-only"})}, "", reconcile.OutcomeConverged, map[string]any{"k": "1"}},
			{"drift: not healed", nil, `{"data":{"k":"hand"}}`, reconcile.OutcomeConverged, map[string]any{"k": "hand"}},
			{"removed from Git: pruned", map[string]string{"x.yaml": ""}, "", reconcile.OutcomeApplied, nil},
		}},
		{"prune disabled", map[string]string{reconcile.AnnotationPrune: "disabled"}, []step{
			{"first sync", nil, "", reconcile.OutcomeApplied, map[string]any{"k": "1"}},
			{"changed in Git: updated", map[string]string{"x.yaml": cmWith("x", "2", map[string]string{reconcile.AnnotationPrune: "disabled"})}, "", reconcile.OutcomeApplied, map[string]any{"k": "2"}},
			{"drift: healed", nil, `{"data":{"k":"hand"}}`, reconcile.OutcomeApplied, map[string]any{"k": "2"}},
			{"removed from Git: orphaned, kept", map[string]string{"x.yaml": ""}, "", reconcile.OutcomeApplied, map[string]any{"k": "2"}},
		}},
		{"ignore-fields", map[string]string{reconcile.AnnotationIgnoreFields: "/data/extra"}, []step{
			{"first sync", nil, "", reconcile.OutcomeApplied, map[string]any{"k": "1"}},
			{"changed in Git: the rest updated", map[string]string{"x.yaml": cmWith("x", "2", map[string]string{reconcile.AnnotationIgnoreFields: "/data/extra"})}, "", reconcile.OutcomeApplied, map[string]any{"k": "2"}},
			{"drift of the ignored field: kept", nil, `{"data":{"extra":"theirs"}}`, reconcile.OutcomeConverged, map[string]any{"k": "2", "extra": "theirs"}},
			{"removed from Git: pruned", map[string]string{"x.yaml": ""}, "", reconcile.OutcomeApplied, nil},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.repo.Commit("first", map[string]string{"x.yaml": cmWith("x", "1", tc.ann), "y.yaml": cmWith("y", "v", nil)})
			for i, s := range tc.steps {
				if i > 0 && s.files != nil {
					h.repo.Commit(s.name, s.files)
				}
				if s.drift != "" {
					h.patchAs(t, gvrConfigMap, "x", s.drift)
				}
				r := h.tick()
				if r.Outcome != s.outcome {
					t.Fatalf("%s: outcome %s, want %s (failure %v, changes %v, skipped %v)", s.name, r.Outcome, s.outcome, r.Failure(), r.Changes, skipped(r))
				}
				got := h.data(t, "x")
				if s.want == nil {
					if got != nil {
						t.Fatalf("%s: ConfigMap x exists (%v), want it gone", s.name, got)
					}
					continue
				}
				for k, v := range s.want {
					if got[k] != v {
						t.Fatalf("%s: data %v, want %v", s.name, got, s.want)
					}
				}
			}
		})
	}
}
