package metrics

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/trace"

	"recond.dev/recond/reconcile"
	"recond.dev/recond/reconcile/diff"
	"recond.dev/recond/reconcile/health"
)

// script feeds a Result through the observer the way a tick does.
func script(m *Metrics, ctx context.Context, r *reconcile.Result) {
	for _, p := range r.Phases {
		m.PhaseEnd(ctx, p, r)
	}
	m.TickEnd(ctx, r)
}

func okPhases(d time.Duration, phases ...reconcile.Phase) []reconcile.PhaseResult {
	var out []reconcile.PhaseResult
	for _, p := range phases {
		out = append(out, reconcile.PhaseResult{Phase: p, Duration: d})
	}
	return out
}

func newTest(t *testing.T) (*Metrics, *prometheus.Registry, *time.Time) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	m := New(reg, Options{Interval: 3 * time.Minute, Version: "v1.2.3"})
	now := time.Unix(1_800_000_000, 0)
	m.now = func() time.Time { return now }
	return m, reg, &now
}

func TestBeforeFirstTick(t *testing.T) {
	_, reg, _ := newTest(t)
	// Every labelled series exists at zero before any tick; both timestamps
	// are 0 so an alert can tell "never ticked / never succeeded".
	want := `
# HELP recond_last_success_timestamp_seconds Unix time the last tick with no failed phase ended; 0 until a tick of this process succeeds.
# TYPE recond_last_success_timestamp_seconds gauge
recond_last_success_timestamp_seconds 0
# HELP recond_last_tick_timestamp_seconds Unix time the last tick ended, any outcome; 0 before the first tick of this process.
# TYPE recond_last_tick_timestamp_seconds gauge
recond_last_tick_timestamp_seconds 0
# HELP recond_interval_seconds The configured interval between ticks.
# TYPE recond_interval_seconds gauge
recond_interval_seconds 180
# HELP recond_ticks_total Finished ticks, by outcome.
# TYPE recond_ticks_total counter
recond_ticks_total{outcome="applied"} 0
recond_ticks_total{outcome="converged"} 0
recond_ticks_total{outcome="failed"} 0
recond_ticks_total{outcome="out_of_sync"} 0
# HELP recond_resource_operations_total Writes to the API server, by action and result.
# TYPE recond_resource_operations_total counter
recond_resource_operations_total{action="create",result="error"} 0
recond_resource_operations_total{action="create",result="success"} 0
recond_resource_operations_total{action="delete",result="error"} 0
recond_resource_operations_total{action="delete",result="success"} 0
recond_resource_operations_total{action="update",result="error"} 0
recond_resource_operations_total{action="update",result="success"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"recond_last_success_timestamp_seconds", "recond_last_tick_timestamp_seconds", "recond_interval_seconds",
		"recond_ticks_total", "recond_resource_operations_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(reg, "recond_phase_failures_total"); n != 5*10 {
		t.Errorf("recond_phase_failures_total has %d series, want 50 (5 phases x 10 reasons)", n)
	}
	if n := testutil.CollectAndCount(reg, "recond_source_info"); n != 0 {
		t.Errorf("recond_source_info has %d series before any read", n)
	}
}

func TestScriptedTicks(t *testing.T) {
	m, reg, now := newTest(t)
	ctx := context.Background()
	all := []reconcile.Phase{reconcile.PhaseRead, reconcile.PhaseObserve, reconcile.PhaseDiff, reconcile.PhaseApply}

	// 1. A first sync that creates 2 objects and updates 1.
	script(m, ctx, &reconcile.Result{
		Revision: "aaaa", Outcome: reconcile.OutcomeApplied, Duration: 30 * time.Millisecond,
		Phases: okPhases(3*time.Millisecond, all...),
		Ops: []reconcile.Operation{
			{Kind: "ConfigMap", Name: "a", Action: diff.Create}, {Kind: "Service", Name: "b", Action: diff.Create},
			{Kind: "Deployment", Name: "c", Action: diff.Update},
		},
		Counts: reconcile.Counts{Desired: 3, Drifted: 3, Created: 2, Updated: 1, Managed: 3},
	})
	// 2. A new revision whose read failed: unavailable. Counts and the
	// success timestamp keep their values; the failure is counted.
	*now = now.Add(time.Minute)
	script(m, ctx, &reconcile.Result{
		Outcome: reconcile.OutcomeFailed, Duration: 2 * time.Second,
		Phases: []reconcile.PhaseResult{{Phase: reconcile.PhaseRead, Duration: 2 * time.Second,
			Err: &reconcile.PhaseError{Phase: reconcile.PhaseRead, Reason: reconcile.ReasonUnavailable, Err: errors.New("dial")}}},
	})
	// 3. Drift reported, not written (self-heal off), at a new revision.
	*now = now.Add(time.Minute)
	script(m, ctx, &reconcile.Result{
		Revision: "bbbb", Outcome: reconcile.OutcomeOutOfSync, Duration: 20 * time.Millisecond,
		Phases: okPhases(3*time.Millisecond, all...),
		Counts: reconcile.Counts{Desired: 3, Drifted: 1, Managed: 3},
	})
	// 4. An apply whose delete failed with a conflict.
	*now = now.Add(time.Minute)
	script(m, ctx, &reconcile.Result{
		Revision: "bbbb", Outcome: reconcile.OutcomeFailed, Duration: 40 * time.Millisecond,
		Phases: append(okPhases(3*time.Millisecond, reconcile.PhaseRead, reconcile.PhaseObserve, reconcile.PhaseDiff),
			reconcile.PhaseResult{Phase: reconcile.PhaseApply, Duration: 30 * time.Millisecond,
				Err: &reconcile.PhaseError{Phase: reconcile.PhaseApply, Reason: reconcile.ReasonConflict, Err: errors.New("uid")}}),
		Ops:    []reconcile.Operation{{Kind: "ConfigMap", Name: "a", Action: diff.Delete, Err: errors.New("uid")}},
		Counts: reconcile.Counts{Desired: 2, Drifted: 1, Managed: 3},
	})

	want := `
# HELP recond_ticks_total Finished ticks, by outcome.
# TYPE recond_ticks_total counter
recond_ticks_total{outcome="applied"} 1
recond_ticks_total{outcome="converged"} 0
recond_ticks_total{outcome="failed"} 2
recond_ticks_total{outcome="out_of_sync"} 1
# HELP recond_resource_operations_total Writes to the API server, by action and result.
# TYPE recond_resource_operations_total counter
recond_resource_operations_total{action="create",result="error"} 0
recond_resource_operations_total{action="create",result="success"} 2
recond_resource_operations_total{action="delete",result="error"} 1
recond_resource_operations_total{action="delete",result="success"} 0
recond_resource_operations_total{action="update",result="error"} 0
recond_resource_operations_total{action="update",result="success"} 1
# HELP recond_last_success_timestamp_seconds Unix time the last tick with no failed phase ended; 0 until a tick of this process succeeds.
# TYPE recond_last_success_timestamp_seconds gauge
recond_last_success_timestamp_seconds 1.80000012e+09
# HELP recond_last_tick_timestamp_seconds Unix time the last tick ended, any outcome; 0 before the first tick of this process.
# TYPE recond_last_tick_timestamp_seconds gauge
recond_last_tick_timestamp_seconds 1.80000018e+09
# HELP recond_drifted_resources Objects that differed from Git at the last diff.
# TYPE recond_drifted_resources gauge
recond_drifted_resources 1
# HELP recond_managed_resources Objects recond owns after the last tick that reached the apply phase.
# TYPE recond_managed_resources gauge
recond_managed_resources 3
# HELP recond_source_info The Git revision last read (value 1).
# TYPE recond_source_info gauge
recond_source_info{revision="bbbb"} 1
# HELP recond_tick_duration_seconds Duration of whole ticks.
# TYPE recond_tick_duration_seconds histogram
recond_tick_duration_seconds_bucket{le="0.001"} 0
recond_tick_duration_seconds_bucket{le="0.0025"} 0
recond_tick_duration_seconds_bucket{le="0.005"} 0
recond_tick_duration_seconds_bucket{le="0.01"} 0
recond_tick_duration_seconds_bucket{le="0.025"} 1
recond_tick_duration_seconds_bucket{le="0.05"} 3
recond_tick_duration_seconds_bucket{le="0.1"} 3
recond_tick_duration_seconds_bucket{le="0.25"} 3
recond_tick_duration_seconds_bucket{le="0.5"} 3
recond_tick_duration_seconds_bucket{le="1"} 3
recond_tick_duration_seconds_bucket{le="2.5"} 4
recond_tick_duration_seconds_bucket{le="5"} 4
recond_tick_duration_seconds_bucket{le="10"} 4
recond_tick_duration_seconds_bucket{le="25"} 4
recond_tick_duration_seconds_bucket{le="50"} 4
recond_tick_duration_seconds_bucket{le="100"} 4
recond_tick_duration_seconds_bucket{le="250"} 4
recond_tick_duration_seconds_bucket{le="600"} 4
recond_tick_duration_seconds_bucket{le="+Inf"} 4
recond_tick_duration_seconds_sum 2.09
recond_tick_duration_seconds_count 4
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"recond_ticks_total", "recond_resource_operations_total", "recond_last_success_timestamp_seconds",
		"recond_last_tick_timestamp_seconds", "recond_drifted_resources", "recond_managed_resources",
		"recond_source_info", "recond_tick_duration_seconds"); err != nil {
		t.Error(err)
	}
	for _, c := range []struct {
		phase, reason string
		want          float64
	}{{"read", "unavailable", 1}, {"apply", "conflict", 1}, {"read", "auth", 0}, {"diff", "invalid", 0}} {
		if got := testutil.ToFloat64(m.phaseFailures.WithLabelValues(c.phase, c.reason)); got != c.want {
			t.Errorf("recond_phase_failures_total{phase=%q,reason=%q} = %v, want %v", c.phase, c.reason, got, c.want)
		}
	}
	// Phases that did not run are not observed: observe ran 3 times, read 4.
	if n := histogramCount(t, reg, "recond_phase_duration_seconds", "observe"); n != 3 {
		t.Errorf("observe phase observed %d times, want 3", n)
	}
	if n := histogramCount(t, reg, "recond_phase_duration_seconds", "read"); n != 4 {
		t.Errorf("read phase observed %d times, want 4", n)
	}
}

func histogramCount(t *testing.T, reg prometheus.Gatherer, name, phase string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "phase" && l.GetValue() == phase {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	t.Fatalf("no %s{phase=%q}", name, phase)
	return 0
}

func TestExemplarCarriesTraceID(t *testing.T) {
	m, reg, _ := newTest(t)
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	sampled := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled,
	}))
	m.PhaseEnd(sampled, reconcile.PhaseResult{Phase: reconcile.PhaseObserve, Duration: 7 * time.Millisecond}, nil)
	// An unsampled tick leaves no exemplar.
	m.PhaseEnd(context.Background(), reconcile.PhaseResult{Phase: reconcile.PhaseDiff, Duration: time.Millisecond}, nil)

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]string{}
	for _, mf := range mfs {
		if mf.GetName() != "recond_phase_duration_seconds" {
			continue
		}
		for _, mm := range mf.GetMetric() {
			phase := mm.GetLabel()[0].GetValue()
			for _, b := range mm.GetHistogram().GetBucket() {
				if ex := b.GetExemplar(); ex != nil {
					found[phase] = ex.GetLabel()[0].GetName() + "=" + ex.GetLabel()[0].GetValue()
				}
			}
			for _, ex := range mm.GetHistogram().GetExemplars() { // native histogram exemplars
				found[phase] = ex.GetLabel()[0].GetName() + "=" + ex.GetLabel()[0].GetValue()
			}
		}
	}
	if found["observe"] != "trace_id=4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("observe exemplar = %q", found["observe"])
	}
	if _, ok := found["diff"]; ok {
		t.Errorf("unsampled phase has an exemplar: %q", found["diff"])
	}
}

func TestSourceInfoKeepsOneSeries(t *testing.T) {
	m, reg, _ := newTest(t)
	for _, rev := range []string{"r1", "r2", "r2", "r3"} {
		m.TickEnd(context.Background(), &reconcile.Result{Revision: rev, Outcome: reconcile.OutcomeConverged})
	}
	want := `
# HELP recond_source_info The Git revision last read (value 1).
# TYPE recond_source_info gauge
recond_source_info{revision="r3"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "recond_source_info"); err != nil {
		t.Error(err)
	}
}

// The same checks as `promtool check metrics`.
func TestLint(t *testing.T) {
	_, reg, _ := newTest(t)
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// Terminating and server-equivalent objects are gauges of the last tick that
// got that far; recond_leader follows the election.
func TestTerminatingEquivalentAndLeader(t *testing.T) {
	m, reg, _ := newTest(t)
	ctx := context.Background()
	all := []reconcile.Phase{reconcile.PhaseRead, reconcile.PhaseObserve, reconcile.PhaseDiff, reconcile.PhaseApply}
	m.SetLeader(true)
	script(m, ctx, &reconcile.Result{Revision: "a", Outcome: reconcile.OutcomeConverged, Phases: okPhases(time.Millisecond, all...),
		Counts: reconcile.Counts{Terminating: 2, Equivalent: 3}})
	// A failed read leaves both as they were.
	script(m, ctx, &reconcile.Result{Outcome: reconcile.OutcomeFailed, Phases: []reconcile.PhaseResult{{Phase: reconcile.PhaseRead,
		Err: &reconcile.PhaseError{Phase: reconcile.PhaseRead, Reason: reconcile.ReasonInvalid, Err: errors.New("bad")}}}})
	want := `
# HELP recond_terminating_resources Owned objects being deleted (deletionTimestamp set) at the last successful diff; not deleted again.
# TYPE recond_terminating_resources gauge
recond_terminating_resources 2
# HELP recond_server_equivalent_resources Objects the local diff saw differ at the last tick although the server showed that applying them changes nothing.
# TYPE recond_server_equivalent_resources gauge
recond_server_equivalent_resources 3
# HELP recond_leader 1 while this process holds the instance's Lease and ticks, 0 while it waits as standby.
# TYPE recond_leader gauge
recond_leader 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"recond_terminating_resources", "recond_server_equivalent_resources", "recond_leader"); err != nil {
		t.Error(err)
	}
	m.SetLeader(false)
	if got := testutil.ToFloat64(m.leader); got != 0 {
		t.Errorf("recond_leader %v as standby, want 0", got)
	}
}

// TestHealthMetrics scripts a revision's life: applied while progressing,
// healthy, degraded, a failed read (nothing assessed), a dry run, a new
// revision. The healthy time is set once per revision and reset by the next.
func TestHealthMetrics(t *testing.T) {
	m, reg, now := newTest(t)
	ctx := context.Background()
	start := *now
	all := []reconcile.Phase{reconcile.PhaseRead, reconcile.PhaseObserve, reconcile.PhaseDiff, reconcile.PhaseApply, reconcile.PhaseHealth}
	assessed := func(s health.Instance, counts map[health.Status]int) *reconcile.Health {
		return &reconcile.Health{Status: s, Counts: counts}
	}
	type want struct {
		status           health.Instance // the one series at 1; "" for none
		applied, healthy float64         // seconds after start; -1 for 0
		current, failed  int
	}
	steps := []struct {
		name string
		res  *reconcile.Result
		want want
	}{
		{"applied, progressing", &reconcile.Result{Revision: "aaaa", Phases: okPhases(time.Millisecond, all...),
			Health: assessed(health.Progressing, map[health.Status]int{health.Current: 1, health.InProgress: 1})},
			want{health.Progressing, 0, -1, 1, 0}},
		{"healthy", &reconcile.Result{Revision: "aaaa", Phases: okPhases(time.Millisecond, all...),
			Health: assessed(health.Healthy, map[health.Status]int{health.Current: 2})},
			want{health.Healthy, 0, 60, 2, 0}},
		{"degraded: healthy time kept", &reconcile.Result{Revision: "aaaa", Phases: okPhases(time.Millisecond, all...),
			Health: assessed(health.Degraded, map[health.Status]int{health.Current: 1, health.Failed: 1})},
			want{health.Degraded, 0, 60, 1, 1}},
		{"healthy again: first time kept", &reconcile.Result{Revision: "aaaa", Phases: okPhases(time.Millisecond, all...),
			Health: assessed(health.Healthy, map[health.Status]int{health.Current: 2})},
			want{health.Healthy, 0, 60, 2, 0}},
		{"read failed: nothing assessed", &reconcile.Result{Outcome: reconcile.OutcomeFailed,
			Phases: []reconcile.PhaseResult{{Phase: reconcile.PhaseRead, Err: &reconcile.PhaseError{Phase: reconcile.PhaseRead, Reason: reconcile.ReasonUnavailable, Err: errors.New("dial")}}}},
			want{health.Healthy, 0, 60, 2, 0}},
		{"dry run of a new revision: not applied", &reconcile.Result{Revision: "bbbb", DryRun: true, Phases: okPhases(time.Millisecond, all...),
			Health: assessed(health.Healthy, map[health.Status]int{health.Current: 2})},
			want{health.Healthy, 0, 60, 2, 0}},
		{"apply of a new revision failed: not applied, health assessed", &reconcile.Result{Revision: "bbbb", Outcome: reconcile.OutcomeFailed,
			Phases: append(okPhases(time.Millisecond, reconcile.PhaseRead, reconcile.PhaseObserve, reconcile.PhaseDiff),
				reconcile.PhaseResult{Phase: reconcile.PhaseApply, Err: &reconcile.PhaseError{Phase: reconcile.PhaseApply, Reason: reconcile.ReasonInvalid, Err: errors.New("rejected")}},
				reconcile.PhaseResult{Phase: reconcile.PhaseHealth}),
			Health: assessed(health.InstanceUnknown, map[health.Status]int{health.Current: 1, health.Unknown: 1})},
			want{health.InstanceUnknown, 0, 60, 1, 0}},
		{"new revision applied: healthy reset", &reconcile.Result{Revision: "bbbb", Phases: okPhases(time.Millisecond, all...),
			Health: assessed(health.Progressing, map[health.Status]int{health.Current: 1, health.InProgress: 1})},
			want{health.Progressing, 420, -1, 1, 0}},
	}
	for i, s := range steps {
		*now = start.Add(time.Duration(i) * time.Minute)
		script(m, ctx, s.res)
		at := func(sec float64) float64 {
			if sec < 0 {
				return 0
			}
			return float64(start.Unix()) + sec
		}
		if got := testutil.ToFloat64(m.revisionApplied); got != at(s.want.applied) {
			t.Errorf("%s: applied timestamp %v, want %v", s.name, got, at(s.want.applied))
		}
		if got := testutil.ToFloat64(m.revisionHealthy); got != at(s.want.healthy) {
			t.Errorf("%s: healthy timestamp %v, want %v", s.name, got, at(s.want.healthy))
		}
		for _, st := range health.Instances {
			want := 0.0
			if st == s.want.status {
				want = 1
			}
			if got := testutil.ToFloat64(m.healthStatus.WithLabelValues(string(st))); got != want {
				t.Errorf("%s: recond_health_status{status=%q} = %v, want %v", s.name, st, got, want)
			}
		}
		if got := testutil.ToFloat64(m.resourcesHealth.WithLabelValues(string(health.Current))); got != float64(s.want.current) {
			t.Errorf("%s: current objects %v, want %d", s.name, got, s.want.current)
		}
		if got := testutil.ToFloat64(m.resourcesHealth.WithLabelValues(string(health.Failed))); got != float64(s.want.failed) {
			t.Errorf("%s: failed objects %v, want %d", s.name, got, s.want.failed)
		}
	}
	if n := testutil.CollectAndCount(reg, "recond_resources_health"); n != len(health.Statuses) {
		t.Errorf("recond_resources_health has %d series, want %d", n, len(health.Statuses))
	}
	if got := testutil.ToFloat64(m.healthTimeout); got != reconcile.DefaultHealthTimeout.Seconds() {
		t.Errorf("recond_health_timeout_seconds = %v, want the default %v", got, reconcile.DefaultHealthTimeout.Seconds())
	}
}

// TestStallsAndPanics: an abandoned phase counts in recond_loop_stalls_total
// and a recovered panic (a phase's, or one write's in apply) in
// recond_panics_total, each by phase; other failures count in neither.
func TestStallsAndPanics(t *testing.T) {
	m, reg, _ := newTest(t)
	fail := func(p reconcile.Phase) *reconcile.PhaseError {
		return &reconcile.PhaseError{Phase: p, Reason: reconcile.ReasonTimeout, Err: errors.New("x")}
	}
	script(m, context.Background(), &reconcile.Result{Outcome: reconcile.OutcomeFailed, Phases: []reconcile.PhaseResult{
		{Phase: reconcile.PhaseRead, Err: fail(reconcile.PhaseRead), Abandoned: true},
	}})
	script(m, context.Background(), &reconcile.Result{Outcome: reconcile.OutcomeFailed, Phases: []reconcile.PhaseResult{
		{Phase: reconcile.PhaseDiff, Err: fail(reconcile.PhaseDiff), Panicked: true},
	}})
	script(m, context.Background(), &reconcile.Result{Outcome: reconcile.OutcomeFailed, Phases: []reconcile.PhaseResult{
		{Phase: reconcile.PhaseApply, Err: fail(reconcile.PhaseApply)},
	}, Ops: []reconcile.Operation{{Kind: "ConfigMap", Name: "a", Err: errors.New("refused")}, {Kind: "ConfigMap", Name: "b", Err: panicked(t)}}})
	want := `
# HELP recond_loop_stalls_total Ticks abandoned because a phase did not return after the tick's deadline, by that phase.
# TYPE recond_loop_stalls_total counter
recond_loop_stalls_total{phase="apply"} 0
recond_loop_stalls_total{phase="diff"} 0
recond_loop_stalls_total{phase="health"} 0
recond_loop_stalls_total{phase="observe"} 0
recond_loop_stalls_total{phase="read"} 1
# HELP recond_panics_total Recovered panics, by phase: the tick (or the write) failed with reason other and a stack.
# TYPE recond_panics_total counter
recond_panics_total{phase="apply"} 1
recond_panics_total{phase="diff"} 1
recond_panics_total{phase="health"} 0
recond_panics_total{phase="observe"} 0
recond_panics_total{phase="read"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "recond_loop_stalls_total", "recond_panics_total"); err != nil {
		t.Error(err)
	}
}

// panicked is the error a recovered panic becomes in a phase.
func panicked(t *testing.T) error {
	t.Helper()
	err := reconcile.PanicError("boom")
	if !reconcile.IsPanic(err) {
		t.Fatal("PanicError is not a panic")
	}
	return err
}

// TestObserveCost: what a tick's observing cost adds up across ticks (API
// calls, sync waits, watch restarts); the cache age is the last tick's.
func TestObserveCost(t *testing.T) {
	m, reg, _ := newTest(t)
	for _, c := range []reconcile.ObserveCost{
		{Calls: 2, SyncWait: 1500 * time.Millisecond, CacheAge: 40 * time.Second, Restarts: 1},
		{Calls: 1, CacheAge: 5 * time.Second, Restarts: 2},
	} {
		script(m, context.Background(), &reconcile.Result{Outcome: reconcile.OutcomeConverged, Observe: &c})
	}
	want := `
# HELP recond_observe_api_calls_total API requests the watch cache made for the observe phase (store misses); 0 with --observe=list.
# TYPE recond_observe_api_calls_total counter
recond_observe_api_calls_total 3
# HELP recond_observe_cache_age_seconds Age of the stalest watch cache at the last tick: time since it last saw an event or a bookmark.
# TYPE recond_observe_cache_age_seconds gauge
recond_observe_cache_age_seconds 5
# HELP recond_observe_sync_wait_seconds_total Time the observe phase waited for watch caches to sync.
# TYPE recond_observe_sync_wait_seconds_total counter
recond_observe_sync_wait_seconds_total 1.5
# HELP recond_watch_restarts_total Watch caches restarted (a fresh LIST and a new watch) because they had seen no event, bookmark or list for --watch-stale-after, or because the check of --watch-check-every found their store behind the API server.
# TYPE recond_watch_restarts_total counter
recond_watch_restarts_total 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "recond_observe_api_calls_total", "recond_observe_cache_age_seconds",
		"recond_observe_sync_wait_seconds_total", "recond_watch_restarts_total"); err != nil {
		t.Error(err)
	}
}
