package reconcile_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/reconcile"
	"recond.dev/recond/reconcile/source"
)

var gvrJob = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}

// hookChart is a chart whose Deployment "web" has replicas replicas, with
// a pre-upgrade Job "migrate", a pre-upgrade ConfigMap "first" of a lower
// weight that deletes itself once it succeeded, and a post-upgrade
// ConfigMap "after".
func hookChart(replicas int) map[string]string {
	return map[string]string{
		"app/Chart.yaml": "apiVersion: v2\nname: app\nversion: 1.0.0\n",
		"app/templates/web.yaml": fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: %d
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: nginx}]
`, replicas),
		"app/templates/migrate.yaml": `apiVersion: batch/v1
kind: Job
metadata:
  name: migrate
  annotations: {"helm.sh/hook": pre-upgrade}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: m, image: busybox, command: ["true"]}]
`,
		"app/templates/first.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: first
  annotations: {"helm.sh/hook": pre-upgrade, "helm.sh/hook-weight": "-1", "helm.sh/hook-delete-policy": hook-succeeded}
`,
		"app/templates/after.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: after
  annotations: {"helm.sh/hook": "post-install,post-upgrade"}
`,
	}
}

// jobDone plays the Job controller: the Job's condition cond (Complete or
// Failed) becomes True.
func (h *harness) jobDone(name, cond string) {
	h.t.Helper()
	h.writeStatus(gvrJob, name, func(*unstructured.Unstructured) map[string]any {
		now := metav1.Now().UTC().Format("2006-01-02T15:04:05Z")
		c := map[string]any{"type": cond, "status": "True", "reason": "Test", "message": "played by the test", "lastTransitionTime": now}
		st := map[string]any{"conditions": []any{c}, "startTime": now}
		if cond == "Complete" {
			st["completionTime"], st["succeeded"] = now, int64(1)
			st["conditions"] = []any{map[string]any{"type": "SuccessCriteriaMet", "status": "True", "reason": "Test", "lastTransitionTime": now}, c}
		} else {
			st["failed"] = int64(1)
			st["conditions"] = []any{map[string]any{"type": "FailureTarget", "status": "True", "reason": "Test", "lastTransitionTime": now}, c}
		}
		return st
	})
}

func (h *harness) replicas() int64 {
	h.t.Helper()
	d := h.get(gvrDeployment, "web")
	if d == nil {
		h.t.Fatal("Deployment web missing")
	}
	n, _, _ := unstructured.NestedInt64(d.Object, "spec", "replicas")
	return n
}

func (h *harness) uid(gvr schema.GroupVersionResource, name string) string {
	h.t.Helper()
	o := h.get(gvr, name)
	if o == nil {
		return ""
	}
	return string(o.GetUID())
}

// A chart's hooks run around its revision: pre-upgrade hooks by weight
// before anything of the revision is written (the Deployment keeps its old
// spec while the Job runs, across ticks and a restart, which neither runs
// the hook again nor forgets it), the self-deleting one removed once it
// succeeded, post-hooks once the revision is applied and healthy, and hook
// objects are never pruned or rewritten as drift. A failed hook fails
// apply with reason hook, names the hook, writes nothing of the revision,
// and is not run again at the same revision.
func TestChartHooks(t *testing.T) {
	h := newHarness(t)
	h.cfg.Path = "app"
	h.helm = &source.HelmOptions{Release: "shop"}
	h.repo.Commit("install", hookChart(1))
	h.mustTick(reconcile.OutcomeApplied) // install: the pre-upgrade hooks do not run
	if h.get(gvrJob, "migrate") != nil || h.get(gvrConfigMap, "first") != nil {
		t.Fatal("pre-upgrade hooks ran at install")
	}

	h.repo.Commit("upgrade", hookChart(2))
	r := h.tick()
	if r.Failure() != nil || h.replicas() != 1 || !strings.Contains(strings.Join(r.HooksWaiting, ","), "Job/migrate") {
		t.Fatalf("while the pre-upgrade Job runs: failure %v, replicas %d, waiting %v; want no failure, replicas 1, waiting for Job/migrate", r.Failure(), h.replicas(), r.HooksWaiting)
	}
	if h.get(gvrConfigMap, "first") != nil {
		t.Error("the hook-succeeded ConfigMap of weight -1 was not deleted once it succeeded")
	}
	job := h.uid(gvrJob, "migrate")
	if job == "" {
		t.Fatal("the pre-upgrade Job was not created")
	}
	if l := h.get(gvrJob, "migrate").GetLabels(); l[reconcile.LabelManagedBy] != "" || l[reconcile.LabelHook] != "recond" {
		t.Errorf("hook labels %v: want %s=recond and no ownership label", l, reconcile.LabelHook)
	}
	h.tick()
	h.rec = nil // a restart: the running hook is neither run again nor forgotten
	if r = h.tick(); h.replicas() != 1 || len(r.HooksWaiting) != 1 || h.uid(gvrJob, "migrate") != job {
		t.Fatalf("after a restart: replicas %d, waiting %v, Job uid %s (was %s)", h.replicas(), r.HooksWaiting, h.uid(gvrJob, "migrate"), job)
	}

	h.jobDone("migrate", "Complete")
	r = h.mustTick(reconcile.OutcomeApplied)
	if h.replicas() != 2 || r.Counts.Updated != 1 {
		t.Fatalf("after the hook succeeded: replicas %d, updated %d; want 2, 1", h.replicas(), r.Counts.Updated)
	}
	if h.get(gvrConfigMap, "after") != nil {
		t.Fatal("the post-upgrade hook ran before the revision was healthy")
	}
	if err := testenv.RollOut(context.Background(), cp.Client, h.ns, "web", testenv.RolledOut); err != nil {
		t.Fatal(err)
	}
	h.tick() // healthy
	h.tick() // the post-hook
	after := h.uid(gvrConfigMap, "after")
	if after == "" {
		t.Fatal("the post-upgrade hook did not run once the revision was healthy")
	}
	for range 2 {
		h.mustTick(reconcile.OutcomeConverged)
	}
	if h.uid(gvrConfigMap, "after") != after || h.uid(gvrJob, "migrate") != job {
		t.Error("a hook object was pruned or created again by a converged tick")
	}

	// A failing pre-upgrade hook: the previous Job is replaced
	// (before-hook-creation), the Deployment is not touched.
	h.repo.Commit("upgrade again", hookChart(3))
	h.tick()
	if h.uid(gvrJob, "migrate") == job || h.uid(gvrJob, "migrate") == "" {
		t.Fatal("the previous run's Job was not replaced by a new one")
	}
	h.jobDone("migrate", "Failed")
	for i := range 2 {
		r = h.tick()
		f := r.Failure()
		if f == nil || f.Phase != reconcile.PhaseApply || f.Reason != reconcile.ReasonHook || !strings.Contains(f.Err.Error(), "Job/migrate") {
			t.Fatalf("tick %d after the hook failed: %v; want apply failed, reason hook, naming Job/migrate", i, f)
		}
		if h.replicas() != 2 {
			t.Fatalf("replicas %d after a failed pre-upgrade hook; want 2 (nothing of the revision written)", h.replicas())
		}
	}
}
