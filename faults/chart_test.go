package faults

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"recond.dev/recond/internal/testenv"
)

// chartFiles is a small chart at the repository's root holding the
// fault matrix's keep ConfigMap, with value.
func chartFiles(value string) map[string]string {
	return map[string]string{
		"Chart.yaml":          "apiVersion: v2\nname: keep\nversion: 1.0.0\n",
		"values.yaml":         "value: " + value + "\n",
		"templates/keep.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: keep\ndata:\n  k: {{ .Values.value | quote }}\n",
	}
}

// TestFaultManifestRunawayChart: a chart whose template computes for
// minutes (nested ranges) on the binary, with a 3 s tick timeout. Each
// tick's render worker is killed at the deadline (read, timeout, a stall
// counted), nothing is written, /healthz stays 200; the fixing commit is
// applied by the next tick that reads it.
func TestFaultManifestRunawayChart(t *testing.T) {
	repo := testenv.NewRepo(t)
	repo.Commit("chart", chartFiles("v1"))
	n := cp.Namespace(t)
	r := StartRecond(t, append(Base(t, repo.URL(), n, Kubeconfig(t)), "--tick-timeout", "3s")...)
	first := r.WaitTick(30*time.Second, 0, Succeeded)
	stalls := r.Metric("recond_loop_stalls_total", map[string]string{"phase": "read"})

	runaway := chartFiles("v2")
	runaway["templates/spin.yaml"] = "{{- range until 100000 }}{{- range until 100000 }}{{- end }}{{- end }}\n"
	repo.Commit("runaway", runaway)
	tk := r.WaitTick(time.Minute, first.ID, Tick.Failed)
	if !FailedIn("read", "timeout")(tk) {
		t.Fatalf("the runaway chart's tick: %s; want failed in read, reason timeout", tk)
	}
	if after := r.Metric("recond_loop_stalls_total", map[string]string{"phase": "read"}); after < stalls+1 {
		t.Errorf(`recond_loop_stalls_total{phase="read"}: %v then %v; want +1`, stalls, after)
	}
	if code := r.Get("/healthz"); code != 200 {
		t.Errorf("/healthz = %d while renders are stopped; want 200", code)
	}
	if d := cmp.Diff(map[string]string{"k": "v1"}, owned(t, n)["keep"].Data); d != "" {
		t.Errorf("keep changed by a render that never finished (-want +got):\n%s", d)
	}
	fixAt := time.Now()
	repo.Commit("fix", map[string]string{"templates/spin.yaml": ""})
	r.Recovery("a runaway chart, fixed", fixAt, tk.ID, 2, 2*time.Minute, Succeeded)
	if d := cmp.Diff(map[string]string{"k": "v2"}, owned(t, n)["keep"].Data); d != "" {
		t.Errorf("keep after the fix (-want +got):\n%s", d)
	}
	if w := renderWorkers(r.Pid()); len(w) > 0 {
		t.Errorf("render workers still running after the fix converged: %v", w)
	}
}

// TestFaultManifestChartReachesOut: a chart that tries every way out of
// its render on the binary: lookup of a Secret in another namespace,
// getHostByName of a listener, a values schema whose $ref is the
// listener's URL, .Files of a path out of the chart. The tick fails in
// read (invalid, naming the schema's reference), nothing is written, the
// listener sees no connection; without the schema the chart renders, its
// lookup empty and its host unresolved.
func TestFaultManifestChartReachesOut(t *testing.T) {
	tw := testenv.NewTripwire(t)
	addr := tw.Addr
	repo := testenv.NewRepo(t)
	repo.Commit("chart", chartFiles("v1"))
	n := cp.Namespace(t)
	r := StartRecond(t, Base(t, repo.URL(), n, Kubeconfig(t))...)
	first := r.WaitTick(30*time.Second, 0, Succeeded)

	files := chartFiles("v2")
	files["templates/out.yaml"] = fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: out
data:
  lookup: {{ lookup "v1" "Secret" "kube-system" "" | toJson | quote }}
  host: {{ getHostByName %q | quote }}
  file: {{ .Files.Get "../../../../etc/passwd" | quote }}
`, addr)
	files["values.schema.json"] = fmt.Sprintf(`{"$ref": "http://%s/schema.json"}`, addr)
	repo.Commit("reach out", files)
	tk := r.WaitTick(time.Minute, first.ID, Tick.Failed)
	if !FailedIn("read", "invalid")(tk) || !strings.Contains(tk.Str("error"), addr) {
		t.Fatalf("the chart's tick: %s; want failed in read, invalid, naming the schema's reference", tk)
	}
	if got := slices.Sorted(maps.Keys(owned(t, n))); !slices.Equal(got, []string{"keep"}) {
		t.Errorf("owned ConfigMaps %v; want keep only (nothing of the refused commit)", got)
	}

	repo.Commit("no schema", map[string]string{"values.schema.json": ""})
	tk = r.WaitTick(time.Minute, tk.ID, Succeeded)
	out := owned(t, n)["out"].Data
	if d := cmp.Diff(map[string]string{"lookup": "{}", "host": "", "file": ""}, out); d != "" {
		t.Errorf("what the chart got of the outside (-want +got):\n%s", d)
	}
	if c := tw.Conns(); c != 0 {
		t.Errorf("the listener saw %d connection(s); want none", c)
	}
}
