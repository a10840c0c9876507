package reconcile_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"recond.dev/recond/reconcile"
)

// jobYAML is a Job whose template the API server keeps as created.
const jobYAML = `apiVersion: batch/v1
kind: Job
metadata:
  name: migrate
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: m, image: busybox, command: ["true"]}]
`

// widerSelector is deploymentYAML with one more selector label (and the
// template's), and annotations ann: a change of an immutable field that
// only adds fields, which the diff cannot decide alone (a server-side
// dry run confirms it: confirmUnchanged).
func widerSelector(t *testing.T, ann string) string {
	t.Helper()
	d := strings.Replace(deploymentYAML, "    matchLabels:\n      app: web\n", "    matchLabels:\n      app: web\n      tier: front\n", 1)
	d = strings.Replace(d, "    metadata:\n      labels:\n        app: web\n", "    metadata:\n      labels:\n        app: web\n        tier: front\n", 1)
	if strings.Count(d, "tier: front") != 2 {
		t.Fatal("fixture: selector or template labels not found")
	}
	if ann != "" {
		d = strings.Replace(d, "  labels:\n", "  annotations:\n    "+ann+"\n  labels:\n", 1)
	}
	return d
}

// One commit changes three immutable fields: a Deployment's selector and
// a Job's template (fields added: the diff asks the server, which
// refuses) and a Service's clusterIP (a value changed: the apply's dry
// run would refuse it). The one failure names all three, reason
// immutable, each in Rejected (what /api/v1/ticks/N serves), and nothing
// of the commit is written. Without probesRefused the diff fails on the
// Deployment alone, reason invalid, Rejected empty: three commits to
// learn what one could say.
func TestDiffNamesEveryImmutableRefusal(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit("app", map[string]string{"deployment.yaml": deploymentYAML, "service.yaml": serviceYAML,
		"job.yaml": jobYAML, "configmap.yaml": configMapYAML})
	h.mustTick(reconcile.OutcomeApplied)
	ip, _, _ := strings.Cut(h.get(gvrService, "web").Object["spec"].(map[string]any)["clusterIP"].(string), " ")
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		t.Fatalf("the Service's clusterIP %q: %v", ip, err)
	}
	other := addr.Next()
	h.repo.Commit("three immutable fields", map[string]string{
		"deployment.yaml": widerSelector(t, ""),
		"service.yaml":    strings.Replace(serviceYAML, "spec:\n", "spec:\n  clusterIP: "+other.String()+"\n", 1),
		"job.yaml":        strings.Replace(jobYAML, "  template:\n    spec:\n", "  template:\n    metadata:\n      labels: {step: two}\n    spec:\n", 1),
		"configmap.yaml":  strings.Replace(configMapYAML, "hello", "bonjour", 1),
	})
	r := h.tick()
	expectFailure(t, r, reconcile.PhaseDiff, reconcile.ReasonImmutable, "nothing written", "3 objects refused",
		"Deployment/web", "spec.selector", "Service/web", "Job/migrate", "spec.template", reconcile.AnnotationForce+": recreate")
	var names []string
	for _, op := range r.Rejected {
		var ie *reconcile.ImmutableError
		if !errors.As(op.Err, &ie) {
			t.Errorf("rejected %s/%s: %v, want an immutable field", op.Kind, op.Name, op.Err)
		}
		names = append(names, op.Kind+"/"+op.Name)
	}
	// In write order: the Service before the workloads.
	if got := strings.Join(names, ","); got != "Service/web,Deployment/web,Job/migrate" {
		t.Errorf("rejected %s, want Service/web,Deployment/web,Job/migrate", got)
	}
	if got := h.get(gvrConfigMap, "web-config").Object["data"].(map[string]any)["greeting"]; got != "hello" {
		t.Errorf("the commit's other change was written: greeting %v", got)
	}

	// `recond diff` (Plan) says the same.
	p := h.reconciler().Plan(context.Background())
	if f := p.Failure(); f == nil || f.Phase != reconcile.PhaseDiff || len(p.Rejected) != 3 {
		t.Errorf("plan: failure %v, %d rejected; want the diff failed with three", f, len(p.Rejected))
	}
}

// What the diff's dry run refuses is judged like what the apply's refuses:
// with recond.dev/force: recreate the Deployment whose selector gained a
// label is recreated within the tick; marked create-only, the refused
// update is never made and nothing fails. Without probesRefused both
// fail the diff, reason invalid.
func TestDiffRefusalRecreatedOrSkipped(t *testing.T) {
	t.Run("recreate", func(t *testing.T) {
		h := newHarness(t)
		h.repo.Commit("app", map[string]string{"deployment.yaml": deploymentYAML})
		h.mustTick(reconcile.OutcomeApplied)
		uid := h.get(gvrDeployment, "web").GetUID()
		h.repo.Commit("wider selector", map[string]string{"deployment.yaml": widerSelector(t, reconcile.AnnotationForce+": recreate")})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		h.playGC(ctx, gvrDeployment)
		r := h.mustTick(reconcile.OutcomeApplied)
		d := h.get(gvrDeployment, "web")
		if d.GetUID() == uid {
			t.Fatal("the Deployment was not recreated")
		}
		if sel := d.Object["spec"].(map[string]any)["selector"].(map[string]any)["matchLabels"].(map[string]any)["tier"]; sel != "front" {
			t.Errorf("selector tier %v after the recreate, want front", sel)
		}
		recreated := false
		for _, op := range r.Ops {
			recreated = recreated || op.Kind == "Deployment" && op.Recreated && op.Err == nil
		}
		if !recreated {
			t.Errorf("no recreated operation in %+v", r.Ops)
		}
		h.mustTick(reconcile.OutcomeConverged)
	})
	t.Run("create-only", func(t *testing.T) {
		h := newHarness(t)
		ann := reconcile.AnnotationApply + ": create-only"
		h.repo.Commit("app", map[string]string{"deployment.yaml": strings.Replace(deploymentYAML, "  labels:\n", "  annotations:\n    "+ann+"\n  labels:\n", 1)})
		h.mustTick(reconcile.OutcomeApplied)
		uid := h.get(gvrDeployment, "web").GetUID()
		h.repo.Commit("wider selector", map[string]string{"deployment.yaml": widerSelector(t, ann)})
		r := h.tick()
		if f := r.Failure(); f != nil {
			t.Fatalf("failure %v, want the update skipped (create-only)", f)
		}
		skipped := false
		for _, s := range r.Skipped {
			skipped = skipped || s.Kind == "Deployment" && s.Reason == reconcile.SkipCreateOnly
		}
		if !skipped {
			t.Errorf("skipped %+v, want Deployment/web create-only", r.Skipped)
		}
		if d := h.get(gvrDeployment, "web"); d.GetUID() != uid {
			t.Error("the Deployment was recreated")
		}
	})
}
