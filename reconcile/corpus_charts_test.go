package reconcile_test

import (
	"strings"
	"testing"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/reconcile"
	"recond.dev/recond/reconcile/source"
)

// chartCorpus is the corpus of public charts of the renderer's tests
// (reconcile/source/testdata/charts/README.md).
const chartCorpus = "source/testdata/charts"

// TestChartCorpusHeld holds each chart of the corpus against the real API
// server: once its install hooks ran, the first tick applies every object
// of a chart that has only
// namespaced objects; three more ticks and a restarted process (a new
// render of the same commit) write nothing. A chart with cluster-scoped
// objects (RBAC for the cluster, webhooks) fails read with reason invalid,
// naming the template, and nothing is written.
func TestChartCorpusHeld(t *testing.T) {
	if testing.Short() {
		t.Skip("the chart corpus against the API server is slow")
	}
	for _, c := range []struct {
		name   string
		values []string
		// clusterScoped: the chart holds objects recond refuses by design.
		clusterScoped bool
	}{
		// The corpus's podinfo values turn on a ServiceMonitor, whose CRD
		// this API server does not serve: turned off again here.
		{name: "podinfo", values: []string{"podinfo/values-prod.yaml", "podinfo.values.yaml", "no-servicemonitor.yaml"}},
		{name: "nginx"},
		{name: "mysql", values: []string{"mysql.values.yaml"}},
		{name: "apache"},
		{name: "grafana", clusterScoped: true},
		{name: "argocd-image-updater", clusterScoped: true},
		{name: "prometheus", clusterScoped: true},
		{name: "ingress-nginx", clusterScoped: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.cfg.Path = c.name
			h.helm = &source.HelmOptions{Release: "corpus", Values: c.values}
			files := testenv.ReadFiles(t, chartCorpus)
			files["no-servicemonitor.yaml"] = "serviceMonitor:\n  enabled: false\n"
			h.repo.Commit("corpus", files)
			r := h.tick()
			// Install hooks (podinfo's Jobs) run first: play the Job
			// controller until none is waited for.
			for i := 0; len(r.HooksWaiting) > 0 && i < 5; i++ {
				for _, k := range r.HooksWaiting {
					if name, ok := strings.CutPrefix(k, "Job/"); ok {
						h.jobDone(name, "Complete")
					}
				}
				r = h.tick()
			}
			if c.clusterScoped {
				f := r.Failure()
				if f == nil || f.Phase != reconcile.PhaseRead || f.Reason != reconcile.ReasonInvalid ||
					!strings.Contains(f.Err.Error(), "cluster-scoped") || !strings.Contains(f.Err.Error(), "/templates/") {
					t.Fatalf("tick: %v; want read failed, invalid, naming a cluster-scoped object and its template", f)
				}
				if r.Counts.Written() != 0 {
					t.Errorf("wrote %d objects of a refused chart", r.Counts.Written())
				}
				return
			}
			if r.Outcome != reconcile.OutcomeApplied || r.Counts.Created != r.Counts.Desired || r.Counts.Desired == 0 {
				t.Fatalf("first tick: %s, created %d of %d (failure %v)", r.Outcome, r.Counts.Created, r.Counts.Desired, r.Failure())
			}
			for i := range 3 {
				if r := h.tick(); r.Outcome != reconcile.OutcomeConverged {
					t.Fatalf("tick %d after the first: %s (changes %v, failure %v)", i+2, r.Outcome, r.Changes, r.Failure())
				}
			}
			h.rec = nil // a restarted process renders the commit afresh
			if r := h.tick(); r.Outcome != reconcile.OutcomeConverged {
				t.Fatalf("after a restart: %s (changes %v, failure %v)", r.Outcome, r.Changes, r.Failure())
			}
			t.Logf("%s: %d objects applied, then converged across 3 ticks and a restart", c.name, r.Counts.Desired)
		})
	}
}
