package metrics

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"recond.dev/recond/events"
	"recond.dev/recond/reconcile"
	"recond.dev/recond/reconcile/diff"
	"recond.dev/recond/reconcile/health"
	"recond.dev/recond/webhook"
)

// kind is the type of a metric.
type kind int

const (
	counter kind = iota
	gauge
	histogram // DurationBuckets, and a native histogram beside them
)

// label is one label of a family and the closed set of its values. New
// pre-initialises a series for every combination of the labels' values,
// so that alerts and rate() see them before the first event. A label
// without values is open (a revision, a version): none of the family's
// series exists until one is set.
type label struct {
	name   string
	values []string
}

// family is one of recond's metrics in one place: the field of Metrics
// that holds it, its type, name (under Namespace), help and labels. New
// walks families to build, register and pre-initialise every collector.
type family struct {
	field  any // a pointer to the field: *prometheus.Gauge, **prometheus.CounterVec, ...
	kind   kind
	name   string
	help   string
	labels []label
}

// families are recond's metrics, with m's fields to hold them. The comment
// of an entry says what its labels are and when its value changes.
func (m *Metrics) families() []family {
	phases, reasons := values(reconcile.Phases), values(reconcile.Reasons)
	return []family{
		// By outcome (converged, applied, out_of_sync, failed).
		{&m.ticks, counter, "ticks_total", "Finished ticks, by outcome.",
			[]label{{"outcome", values(reconcile.Outcomes)}}},
		{&m.tickDuration, histogram, "tick_duration_seconds", "Duration of whole ticks.", nil},
		// Each phase that ran; its exemplars carry the tick's trace_id.
		{&m.phaseDuration, histogram, "phase_duration_seconds",
			"Duration of each phase that ran, by phase; exemplars carry the tick's trace_id.",
			[]label{{"phase", phases}}},
		// By phase and reason (the closed set of reconcile.Reasons).
		{&m.phaseFailures, counter, "phase_failures_total", "Failed phases, by phase and reason.",
			[]label{{"phase", phases}, {"reason", reasons}}},
		// Abandoned ticks, by the phase that did not return after the
		// tick's deadline (reconcile.AbandonAfter).
		{&m.stalls, counter, "loop_stalls_total",
			"Ticks abandoned because a phase did not return after the tick's deadline, by that phase.",
			[]label{{"phase", phases}}},
		{&m.superseded, counter, "renders_superseded_total",
			"Renders stopped because the followed ref moved while they ran; the tick read the newer revision.", nil},
		// Desired objects a chart's key or certificate maker made part of,
		// at the last tick that read Git.
		{&m.generatedOnce, gauge, "generated_once_resources",
			"Desired objects with fields that a chart's key or certificate maker (or a random salt) made, at the last tick that read Git: written at creation, live values kept after that.", nil},
		// Objects the per-object opt-outs held back at the last tick whose
		// diff ran, by reason (reconcile.SkipReasons).
		{&m.skipped, gauge, "skipped_resources",
			"Objects a per-object opt-out held back at the last tick whose diff ran, by reason: reconcile_disabled (recond.dev/reconcile: disabled), create_only (an update not made), prune_disabled (orphaned instead of deleted), ignore_fields (fields neither compared nor sent).",
			[]label{{"reason", values(reconcile.SkipReasons)}}},
		// 1 while an operator's suspension is in force (the last tick wrote
		// nothing), else 0.
		{&m.suspended, gauge, "suspended",
			"1 while an operator's suspension is in force (recond suspend, or the recond.dev/suspended-until annotation of the inventory ConfigMap): ticks read, observe, diff and assess health, and write, prune and heal nothing; else 0.", nil},
		// When the suspension ends by itself (0: not suspended).
		{&m.suspendedUntil, gauge, "suspended_until_timestamp_seconds",
			"When the suspension in force ends by itself (Unix time; the loop then resumes and heals what differs from Git); 0 when not suspended.", nil},
		// By phase (a phase's own, or one object's write within apply).
		{&m.panics, counter, "panics_total",
			"Recovered panics, by phase: the tick (or the write) failed with reason other and a stack.",
			[]label{{"phase", phases}}},
		// The end of the last tick, any outcome (0 before the first).
		{&m.lastTick, gauge, "last_tick_timestamp_seconds",
			"Unix time the last tick ended, any outcome; 0 before the first tick of this process.", nil},
		// The end of the last tick with no failed phase (0 until one
		// succeeds in this process).
		{&m.lastSuccess, gauge, "last_success_timestamp_seconds",
			"Unix time the last tick with no failed phase ended; 0 until a tick of this process succeeds.", nil},
		// The configured --interval, for alerts that scale with it.
		{&m.interval, gauge, "interval_seconds", "The configured interval between ticks.", nil},
		{&m.managed, gauge, "managed_resources", "Objects recond owns after the last tick that reached the apply phase.", nil},
		{&m.drifted, gauge, "drifted_resources", "Objects that differed from Git at the last diff.", nil},
		// Owned objects held by a finalizer at the last successful diff.
		{&m.terminating, gauge, "terminating_resources",
			"Owned objects being deleted (deletionTimestamp set) at the last successful diff; not deleted again.", nil},
		// A normalisation gap: reported converged instead of rewritten.
		{&m.equivalent, gauge, "server_equivalent_resources",
			"Objects the local diff saw differ at the last tick although the server showed that applying them changes nothing.", nil},
		// 1 while this process holds the Lease (or runs without leader
		// election), 0 while it waits as standby.
		{&m.leader, gauge, "leader",
			"1 while this process holds the instance's Lease and ticks, 0 while it waits as standby.", nil},
		// By reason (the closed set of reconcile.Reasons): forbidden is a
		// Role that does not name the Lease.
		{&m.leaseFailures, counter, "lease_failures_total",
			"Requests on the instance's Lease (get, create, update, list, watch) that failed, by reason.",
			[]label{{"reason", reasons}}},
		// By what asked for them (reconcile.Triggers).
		{&m.triggers, counter, "tick_triggers_total", "Ticks by what asked for them.",
			[]label{{"source", values(reconcile.Triggers)}}},
		{&m.healLatency, histogram, "heal_latency_seconds",
			"Time from the watch event that showed another manager's change to the end of the write that restored it.", nil},
		{&m.conflicts, counter, "self_heal_conflicts_total",
			"Fights with another manager: an object restored again within 10 s, whose self-heal then backs off.", nil},
		// Store misses of a watch cache; with --observe=list every LIST is
		// one, visible in the spans instead.
		{&m.observeCalls, counter, "observe_api_calls_total",
			"API requests the watch cache made for the observe phase (store misses); 0 with --observe=list.", nil},
		{&m.observeSyncWait, counter, "observe_sync_wait_seconds_total",
			"Time the observe phase waited for watch caches to sync.", nil},
		{&m.cacheAge, gauge, "observe_cache_age_seconds",
			"Age of the stalest watch cache at the last tick: time since it last saw an event or a bookmark.", nil},
		{&m.watchRestarts, counter, "watch_restarts_total",
			"Watch caches restarted (a fresh LIST and a new watch) because they had seen no event, bookmark or list for --watch-stale-after, or because the check of --watch-check-every found their store behind the API server.", nil},
		// By health (health.Statuses) at the last health assessment.
		{&m.resourcesHealth, gauge, "resources_health", "Desired objects by health at the last health assessment.",
			[]label{{"health", values(health.Statuses)}}},
		// 1 for the instance's health at the last assessment
		// (health.Instances), 0 for the others; all 0 before the first.
		{&m.healthStatus, gauge, "health_status",
			"1 for the instance's health at the last assessment (the worst of its objects'), 0 for the others.",
			[]label{{"status", values(health.Instances)}}},
		// For a revision applied before this process started, when the
		// first tick found it in place.
		{&m.revisionApplied, gauge, "revision_applied_timestamp_seconds",
			"Unix time the current revision was applied (or first found in place by this process); 0 before.", nil},
		{&m.revisionHealthy, gauge, "revision_healthy_timestamp_seconds",
			"Unix time the current revision first became fully healthy; 0 before, and again when a new revision is applied.", nil},
		// The configured --health-timeout, for alerts that scale with it.
		{&m.healthTimeout, gauge, "health_timeout_seconds",
			"The configured --health-timeout: how long an object may stay in progress before it counts as failed.", nil},
		// By reason (the closed set of events.Reasons).
		{&m.events, counter, "events_total",
			"Kubernetes Events recorded, by reason: one per state transition, none for an unchanged tick.",
			[]label{{"reason", events.Reasons}}},
		// By provider (webhook.Providers) and result (webhook.Results).
		{&m.webhooks, counter, "webhook_requests_total", "Requests to POST /hooks/git, by provider and result.",
			[]label{{"provider", webhook.Providers}, {"result", webhook.Results}}},
		// By action (create, update, delete) and result (success, error).
		{&m.operations, counter, "resource_operations_total", "Writes to the API server, by action and result.",
			[]label{{"action", values([]diff.Action{diff.Create, diff.Update, diff.Delete})}, {"result", []string{"success", "error"}}}},
		// 1 for the revision last read; the previous revision's series is
		// deleted (setRevision).
		{&m.sourceInfo, gauge, "source_info", "The Git revision last read (value 1).",
			[]label{{"revision", nil}}},
		// 1, labelled with the version and the Go version.
		{&m.buildInfo, gauge, "build_info", "recond's version and Go version (value 1).",
			[]label{{"version", nil}, {"goversion", nil}}},
	}
}

// collector builds the family's collector, stores it in its field and
// pre-initialises its series.
func (f family) collector() prometheus.Collector {
	names := make([]string, len(f.labels))
	for i, l := range f.labels {
		names[i] = l.name
	}
	var (
		c    prometheus.Collector
		with func(...string)
	)
	switch {
	case f.kind == counter && len(names) == 0:
		c = store(f, prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: f.name, Help: f.help}))
	case f.kind == counter:
		v := store(f, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: f.name, Help: f.help}, names))
		c, with = v, func(lv ...string) { v.WithLabelValues(lv...) }
	case f.kind == gauge && len(names) == 0:
		c = store(f, prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: f.name, Help: f.help}))
	case f.kind == gauge:
		v := store(f, prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: f.name, Help: f.help}, names))
		c, with = v, func(lv ...string) { v.WithLabelValues(lv...) }
	case f.kind == histogram && len(names) == 0:
		c = store(f, prometheus.NewHistogram(f.histogramOpts()))
	case f.kind == histogram:
		v := store(f, prometheus.NewHistogramVec(f.histogramOpts(), names))
		c, with = v, func(lv ...string) { v.WithLabelValues(lv...) }
	}
	if with != nil {
		for _, lv := range f.series() {
			with(lv...)
		}
	}
	return c
}

// histogramOpts resolve 1 ms to 10 min in classic buckets (DurationBuckets)
// and, for a scraper that takes them, in native buckets 10% apart.
func (f family) histogramOpts() prometheus.HistogramOpts {
	return prometheus.HistogramOpts{
		Namespace: Namespace, Name: f.name, Help: f.help, Buckets: DurationBuckets,
		NativeHistogramBucketFactor:     1.1,
		NativeHistogramMaxBucketNumber:  160,
		NativeHistogramMinResetDuration: time.Hour,
	}
}

// series are the label values of every series to pre-initialise: each
// combination of the labels' closed sets, none when a label is open.
func (f family) series() [][]string {
	all := [][]string{nil}
	for _, l := range f.labels {
		var next [][]string
		for _, prefix := range all {
			for _, v := range l.values {
				next = append(next, append(prefix[:len(prefix):len(prefix)], v))
			}
		}
		all = next
	}
	return all
}

// store puts c in f's field, which must be of c's type.
func store[C any](f family, c C) C {
	p, ok := f.field.(*C)
	if !ok {
		panic(fmt.Sprintf("metrics: %s is a %T, its field a %T", f.name, c, f.field))
	}
	*p = c
	return c
}

// values are a closed set's values as label values.
func values[T ~string](set []T) []string {
	out := make([]string, len(set))
	for i, v := range set {
		out[i] = string(v)
	}
	return out
}
