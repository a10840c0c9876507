package metrics

import (
	"context"
	"runtime"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"recond.dev/recond/events"
	"recond.dev/recond/reconcile"
	"recond.dev/recond/reconcile/diff"
	"recond.dev/recond/reconcile/health"
	"recond.dev/recond/webhook"
)

// Namespace prefixes every recond metric.
const Namespace = "recond"

// DurationBuckets resolve 1 ms to 10 min: 1-2.5-5 steps per decade.
var DurationBuckets = []float64{
	0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
	1, 2.5, 5, 10, 25, 50, 100, 250, 600,
}

// Metrics records ticks. It implements reconcile.Observer.
type Metrics struct {
	// ticks counts finished ticks by outcome (converged, applied,
	// out_of_sync, failed).
	ticks *prometheus.CounterVec
	// tickDuration is the duration of whole ticks.
	tickDuration prometheus.Histogram
	// phaseDuration is the duration of each phase that ran, by phase; its
	// exemplars carry the tick's trace_id.
	phaseDuration *prometheus.HistogramVec
	// phaseFailures counts failed phases by phase and reason (the closed
	// set of reconcile.Reasons).
	phaseFailures *prometheus.CounterVec
	// stalls counts abandoned ticks by the phase that did not return after
	// the tick's deadline (reconcile.AbandonAfter).
	stalls *prometheus.CounterVec
	// superseded counts renders stopped because the followed ref moved
	// while they ran.
	superseded prometheus.Counter
	// generatedOnce is how many desired objects a chart's key or
	// certificate maker made part of, at the last tick that read Git.
	generatedOnce prometheus.Gauge
	// skipped is how many objects the per-object opt-outs held back at the
	// last tick whose diff ran, by reason (reconcile.SkipReasons).
	skipped *prometheus.GaugeVec
	// suspended is 1 while an operator's suspension is in force (the last
	// tick wrote nothing), else 0; suspendedUntil is when it ends by
	// itself (0: not suspended).
	suspended, suspendedUntil prometheus.Gauge
	// panics counts recovered panics by phase (a phase's own, or one
	// object's write within apply).
	panics *prometheus.CounterVec
	// lastTick is the end of the last tick, any outcome (0 before the first).
	lastTick prometheus.Gauge
	// lastSuccess is the end of the last tick with no failed phase (0 until
	// one succeeds in this process).
	lastSuccess prometheus.Gauge
	// interval is the configured --interval, for alerts that scale with it.
	interval prometheus.Gauge
	// managed is how many objects recond owned after the last tick that
	// reached the apply phase.
	managed prometheus.Gauge
	// drifted is how many objects differed from Git at the last diff.
	drifted prometheus.Gauge
	// terminating is how many owned objects were being deleted (held by a
	// finalizer) at the last successful diff.
	terminating prometheus.Gauge
	// equivalent is how many objects the local diff saw differ at the last
	// tick although the server showed applying them changes nothing (a
	// normalisation gap, reported converged instead of rewritten).
	equivalent prometheus.Gauge
	// leader is 1 while this process holds the instance's Lease (or runs
	// without leader election), 0 while it waits as standby.
	leader prometheus.Gauge
	// leaseFailures counts requests on the instance's Lease (get, create,
	// update, and the watch's list and watch) that failed, by reason (the
	// closed set of reconcile.Reasons): forbidden is a Role that does not
	// name the Lease.
	leaseFailures *prometheus.CounterVec
	// triggers counts ticks by what asked for them (interval, watch,
	// manual).
	triggers *prometheus.CounterVec
	// healLatency is the time from the watch event that showed another
	// manager's change to the end of the write that restored it.
	healLatency prometheus.Histogram
	// conflicts counts fights: an object restored less than 10 s after its
	// previous restore, whose self-heal then backs off.
	conflicts prometheus.Counter
	// observeCalls counts API requests a watch cache made on behalf of the
	// observe phase (store misses); with --observe=list every LIST is one,
	// visible in the spans instead.
	observeCalls prometheus.Counter
	// observeSyncWait is the time observe waited for watch caches to sync.
	observeSyncWait prometheus.Counter
	// cacheAge is the age of the stalest watch cache at the last tick.
	cacheAge prometheus.Gauge
	// watchRestarts counts watch caches restarted for having seen nothing
	// for --watch-stale-after.
	watchRestarts prometheus.Counter
	// resourcesHealth is how many desired objects had each health
	// (current, in_progress, failed, terminating, unknown) at the last
	// health assessment.
	resourcesHealth *prometheus.GaugeVec
	// healthStatus is 1 for the instance's health at the last assessment
	// (healthy, progressing, degraded, unknown) and 0 for the others; all 0
	// before the first.
	healthStatus *prometheus.GaugeVec
	// revisionApplied is when the current revision was applied (the tick
	// that recorded it ended), or, for a revision applied before this
	// process started, when the first tick found it in place; 0 before.
	revisionApplied prometheus.Gauge
	// revisionHealthy is when the current revision first became healthy;
	// 0 before, and 0 again as soon as another revision is applied.
	revisionHealthy prometheus.Gauge
	// healthTimeout is the configured --health-timeout, for alerts that
	// scale with it.
	healthTimeout prometheus.Gauge
	// events counts the Kubernetes Events recond recorded, by reason (the
	// closed set of events.Reasons): one per state transition.
	events *prometheus.CounterVec
	// webhooks counts requests to POST /hooks/git by provider (github,
	// gitea, gitlab, bitbucket, unknown) and result (accepted, ignored,
	// replayed, unauthorized, invalid, limited).
	webhooks *prometheus.CounterVec
	// operations counts writes to the API by action (create, update,
	// delete) and result (success, error).
	operations *prometheus.CounterVec
	// sourceInfo is 1 for the revision last read; the previous revision's
	// series is deleted.
	sourceInfo *prometheus.GaugeVec
	// buildInfo is 1, labelled with the version and the Go version.
	buildInfo *prometheus.GaugeVec

	mu       sync.Mutex
	revision string
	// applied is the revision revisionApplied is about; healthy whether it
	// has been healthy since.
	applied string
	healthy bool
	now     func() time.Time
}

// Options are the fixed facts the metrics report.
type Options struct {
	Interval      time.Duration
	HealthTimeout time.Duration
	Version       string
}

// New creates recond's metrics, registers them with reg and pre-initialises
// every labelled series, so that alerts and rate() see them before the first
// event.
func New(reg prometheus.Registerer, o Options) *Metrics {
	histogram := func(name, help string) prometheus.HistogramOpts {
		return prometheus.HistogramOpts{
			Namespace: Namespace, Name: name, Help: help, Buckets: DurationBuckets,
			NativeHistogramBucketFactor:     1.1,
			NativeHistogramMaxBucketNumber:  160,
			NativeHistogramMinResetDuration: time.Hour,
		}
	}
	m := &Metrics{
		ticks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "ticks_total", Help: "Finished ticks, by outcome.",
		}, []string{"outcome"}),
		tickDuration: prometheus.NewHistogram(histogram("tick_duration_seconds", "Duration of whole ticks.")),
		phaseDuration: prometheus.NewHistogramVec(histogram("phase_duration_seconds",
			"Duration of each phase that ran, by phase; exemplars carry the tick's trace_id."), []string{"phase"}),
		phaseFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "phase_failures_total", Help: "Failed phases, by phase and reason.",
		}, []string{"phase", "reason"}),
		stalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "loop_stalls_total",
			Help: "Ticks abandoned because a phase did not return after the tick's deadline, by that phase.",
		}, []string{"phase"}),
		superseded: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Name: "renders_superseded_total",
			Help: "Renders stopped because the followed ref moved while they ran; the tick read the newer revision.",
		}),
		generatedOnce: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "generated_once_resources",
			Help: "Desired objects with fields that a chart's key or certificate maker (or a random salt) made, at the last tick that read Git: written at creation, live values kept after that.",
		}),
		skipped: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "skipped_resources",
			Help: "Objects a per-object opt-out held back at the last tick whose diff ran, by reason: reconcile_disabled (recond.dev/reconcile: disabled), create_only (an update not made), prune_disabled (orphaned instead of deleted), ignore_fields (fields neither compared nor sent).",
		}, []string{"reason"}),
		suspended: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "suspended",
			Help: "1 while an operator's suspension is in force (recond suspend, or the recond.dev/suspended-until annotation of the inventory ConfigMap): ticks read, observe, diff and assess health, and write, prune and heal nothing; else 0.",
		}),
		suspendedUntil: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "suspended_until_timestamp_seconds",
			Help: "When the suspension in force ends by itself (Unix time; the loop then resumes and heals what differs from Git); 0 when not suspended.",
		}),
		panics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "panics_total",
			Help: "Recovered panics, by phase: the tick (or the write) failed with reason other and a stack.",
		}, []string{"phase"}),
		lastTick: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "last_tick_timestamp_seconds",
			Help: "Unix time the last tick ended, any outcome; 0 before the first tick of this process.",
		}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "last_success_timestamp_seconds",
			Help: "Unix time the last tick with no failed phase ended; 0 until a tick of this process succeeds.",
		}),
		interval: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "interval_seconds", Help: "The configured interval between ticks.",
		}),
		managed: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "managed_resources", Help: "Objects recond owns after the last tick that reached the apply phase.",
		}),
		drifted: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "drifted_resources", Help: "Objects that differed from Git at the last diff.",
		}),
		terminating: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "terminating_resources",
			Help: "Owned objects being deleted (deletionTimestamp set) at the last successful diff; not deleted again.",
		}),
		equivalent: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "server_equivalent_resources",
			Help: "Objects the local diff saw differ at the last tick although the server showed that applying them changes nothing.",
		}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "leader",
			Help: "1 while this process holds the instance's Lease and ticks, 0 while it waits as standby.",
		}),
		leaseFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "lease_failures_total",
			Help: "Requests on the instance's Lease (get, create, update, list, watch) that failed, by reason.",
		}, []string{"reason"}),
		triggers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "tick_triggers_total", Help: "Ticks by what asked for them.",
		}, []string{"source"}),
		healLatency: prometheus.NewHistogram(histogram("heal_latency_seconds",
			"Time from the watch event that showed another manager's change to the end of the write that restored it.")),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Name: "self_heal_conflicts_total",
			Help: "Fights with another manager: an object restored again within 10 s, whose self-heal then backs off.",
		}),
		observeCalls: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Name: "observe_api_calls_total",
			Help: "API requests the watch cache made for the observe phase (store misses); 0 with --observe=list.",
		}),
		observeSyncWait: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Name: "observe_sync_wait_seconds_total",
			Help: "Time the observe phase waited for watch caches to sync.",
		}),
		cacheAge: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "observe_cache_age_seconds",
			Help: "Age of the stalest watch cache at the last tick: time since it last saw an event or a bookmark.",
		}),
		watchRestarts: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Name: "watch_restarts_total",
			Help: "Watch caches restarted (a fresh LIST and a new watch) because they had seen no event, bookmark or list for --watch-stale-after, or because the check of --watch-check-every found their store behind the API server.",
		}),
		resourcesHealth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "resources_health", Help: "Desired objects by health at the last health assessment.",
		}, []string{"health"}),
		healthStatus: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "health_status",
			Help: "1 for the instance's health at the last assessment (the worst of its objects'), 0 for the others.",
		}, []string{"status"}),
		revisionApplied: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "revision_applied_timestamp_seconds",
			Help: "Unix time the current revision was applied (or first found in place by this process); 0 before.",
		}),
		revisionHealthy: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "revision_healthy_timestamp_seconds",
			Help: "Unix time the current revision first became fully healthy; 0 before, and again when a new revision is applied.",
		}),
		healthTimeout: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "health_timeout_seconds",
			Help: "The configured --health-timeout: how long an object may stay in progress before it counts as failed.",
		}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "events_total",
			Help: "Kubernetes Events recorded, by reason: one per state transition, none for an unchanged tick.",
		}, []string{"reason"}),
		webhooks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "webhook_requests_total",
			Help: "Requests to POST /hooks/git, by provider and result.",
		}, []string{"provider", "result"}),
		operations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "resource_operations_total", Help: "Writes to the API server, by action and result.",
		}, []string{"action", "result"}),
		sourceInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "source_info", Help: "The Git revision last read (value 1).",
		}, []string{"revision"}),
		buildInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "build_info", Help: "recond's version and Go version (value 1).",
		}, []string{"version", "goversion"}),
		now: time.Now,
	}
	reg.MustRegister(m.ticks, m.tickDuration, m.phaseDuration, m.phaseFailures, m.stalls, m.superseded, m.generatedOnce, m.skipped, m.suspended, m.suspendedUntil, m.panics, m.lastTick, m.lastSuccess,
		m.interval, m.managed, m.drifted, m.terminating, m.equivalent, m.leader, m.leaseFailures, m.triggers, m.healLatency, m.conflicts, m.observeCalls, m.observeSyncWait, m.cacheAge, m.watchRestarts,
		m.resourcesHealth, m.healthStatus, m.revisionApplied, m.revisionHealthy, m.healthTimeout, m.events, m.webhooks, m.operations, m.sourceInfo, m.buildInfo)

	for _, o := range reconcile.Outcomes {
		m.ticks.WithLabelValues(string(o))
	}
	for _, why := range reconcile.SkipReasons {
		m.skipped.WithLabelValues(string(why))
	}
	for _, p := range reconcile.Phases {
		m.phaseDuration.WithLabelValues(string(p))
		for _, r := range reconcile.Reasons {
			m.phaseFailures.WithLabelValues(string(p), string(r))
		}
		m.stalls.WithLabelValues(string(p))
		m.panics.WithLabelValues(string(p))
	}
	for _, t := range reconcile.Triggers {
		m.triggers.WithLabelValues(string(t))
	}
	for _, r := range reconcile.Reasons {
		m.leaseFailures.WithLabelValues(string(r))
	}
	for _, a := range []diff.Action{diff.Create, diff.Update, diff.Delete} {
		for _, r := range []string{"success", "error"} {
			m.operations.WithLabelValues(string(a), r)
		}
	}
	for _, s := range health.Statuses {
		m.resourcesHealth.WithLabelValues(string(s))
	}
	for _, r := range events.Reasons {
		m.events.WithLabelValues(r)
	}
	for _, p := range webhook.Providers {
		for _, r := range webhook.Results {
			m.webhooks.WithLabelValues(p, r)
		}
	}
	for _, s := range health.Instances {
		m.healthStatus.WithLabelValues(string(s))
	}
	m.interval.Set(o.Interval.Seconds())
	if o.HealthTimeout <= 0 {
		o.HealthTimeout = reconcile.DefaultHealthTimeout
	}
	m.healthTimeout.Set(o.HealthTimeout.Seconds())
	m.buildInfo.WithLabelValues(o.Version, runtime.Version()).Set(1)
	return m
}

// TickStart implements reconcile.Observer.
func (m *Metrics) TickStart(ctx context.Context) context.Context { return ctx }

// PhaseStart implements reconcile.Observer.
func (m *Metrics) PhaseStart(ctx context.Context, _ reconcile.Phase) context.Context { return ctx }

// PhaseEnd records a phase's duration, with the trace id as exemplar when
// the tick is sampled, and its failure.
func (m *Metrics) PhaseEnd(ctx context.Context, pr reconcile.PhaseResult, _ *reconcile.Result) {
	obs := m.phaseDuration.WithLabelValues(string(pr.Phase))
	if sc := trace.SpanContextFromContext(ctx); sc.IsSampled() {
		obs.(prometheus.ExemplarObserver).ObserveWithExemplar(pr.Duration.Seconds(), prometheus.Labels{"trace_id": sc.TraceID().String()})
	} else {
		obs.Observe(pr.Duration.Seconds())
	}
	if pr.Err != nil {
		m.phaseFailures.WithLabelValues(string(pr.Phase), string(pr.Err.Reason)).Inc()
	}
	if pr.Abandoned {
		m.stalls.WithLabelValues(string(pr.Phase)).Inc()
	}
	if pr.Panicked {
		m.panics.WithLabelValues(string(pr.Phase)).Inc()
	}
}

// TickEnd records the tick's outcome, writes, counts and timestamps.
func (m *Metrics) TickEnd(ctx context.Context, r *reconcile.Result) {
	m.ticks.WithLabelValues(string(r.Outcome)).Inc()
	m.superseded.Add(float64(r.Superseded))
	if s := r.Suspension; s != nil {
		m.suspended.Set(1)
		m.suspendedUntil.Set(float64(s.Until.Unix()))
	} else {
		m.suspended.Set(0)
		m.suspendedUntil.Set(0)
	}
	if len(r.Phases) > 0 && r.Phases[0].Phase == reconcile.PhaseRead && r.Phases[0].Err == nil {
		m.generatedOnce.Set(float64(r.Counts.GeneratedOnce))
	}
	for _, op := range r.Ops {
		if reconcile.IsPanic(op.Err) {
			m.panics.WithLabelValues(string(reconcile.PhaseApply)).Inc()
		}
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsSampled() {
		m.tickDuration.(prometheus.ExemplarObserver).ObserveWithExemplar(r.Duration.Seconds(), prometheus.Labels{"trace_id": sc.TraceID().String()})
	} else {
		m.tickDuration.Observe(r.Duration.Seconds())
	}
	if c := r.Observe; c != nil {
		m.observeCalls.Add(float64(c.Calls))
		m.observeSyncWait.Add(c.SyncWait.Seconds())
		m.cacheAge.Set(c.CacheAge.Seconds())
		m.watchRestarts.Add(float64(c.Restarts))
	}
	if r.Trigger != "" {
		m.triggers.WithLabelValues(string(r.Trigger)).Inc()
	}
	for _, h := range r.Heals {
		m.healLatency.Observe(h.Latency.Seconds())
		if h.Fight {
			m.conflicts.Inc()
		}
	}
	for _, op := range r.Ops {
		result := "success"
		if op.Err != nil {
			result = "error"
		}
		m.operations.WithLabelValues(string(op.Action), result).Inc()
	}
	ran := map[reconcile.Phase]bool{}
	for _, p := range r.Phases {
		ran[p.Phase] = p.Err == nil
	}
	if ran[reconcile.PhaseDiff] {
		by := map[reconcile.SkipReason]int{}
		for _, s := range r.Skipped {
			by[s.Reason]++
		}
		for _, why := range reconcile.SkipReasons {
			m.skipped.WithLabelValues(string(why)).Set(float64(by[why]))
		}
		m.drifted.Set(float64(r.Counts.Drifted))
		m.terminating.Set(float64(r.Counts.Terminating))
	}
	if ran[reconcile.PhaseDiff] && r.Failure() == nil {
		m.equivalent.Set(float64(r.Counts.Equivalent))
	}
	if _, ok := ran[reconcile.PhaseApply]; ok {
		m.managed.Set(float64(r.Counts.Managed))
	}
	if r.Revision != "" {
		m.setRevision(r.Revision)
	}
	end := float64(m.now().UnixNano()) / 1e9
	m.recordHealth(r, ran[reconcile.PhaseApply], end)
	m.lastTick.Set(end)
	if r.Failure() == nil {
		m.lastSuccess.Set(end)
	}
}

// recordHealth records the health the tick found and the revision's
// applied and healthy times. applied is whether the apply phase ran and
// succeeded: then r.Revision is the revision in place.
func (m *Metrics) recordHealth(r *reconcile.Result, applied bool, now float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if applied && !r.DryRun && r.Revision != m.applied {
		m.applied = r.Revision
		m.revisionApplied.Set(now)
		m.revisionHealthy.Set(0)
		m.healthy = false
	}
	h := r.Health
	if h == nil {
		return
	}
	for _, s := range health.Statuses {
		m.resourcesHealth.WithLabelValues(string(s)).Set(float64(h.Counts[s]))
	}
	for _, s := range health.Instances {
		v := 0.0
		if s == h.Status {
			v = 1
		}
		m.healthStatus.WithLabelValues(string(s)).Set(v)
	}
	if h.Status == health.Healthy && m.applied != "" && r.Revision == m.applied {
		if !m.healthy {
			m.healthy = true
			m.revisionHealthy.Set(now)
		}
	}
}

// EventRecorded counts an Event recond recorded (events.Options.Recorded).
func (m *Metrics) EventRecorded(reason, _ string) { m.events.WithLabelValues(reason).Inc() }

// WebhookRequest counts a request to POST /hooks/git (webhook.Config.Observe).
func (m *Metrics) WebhookRequest(provider, result string) {
	m.webhooks.WithLabelValues(provider, result).Inc()
}

// SetLeader records whether this process leads its instance.
func (m *Metrics) SetLeader(leading bool) {
	v := 0.0
	if leading {
		v = 1
	}
	m.leader.Set(v)
}

// LeaseFailed counts a failed request on the instance's Lease, by reason
// (leader.Config.Failed).
func (m *Metrics) LeaseFailed(reason string) { m.leaseFailures.WithLabelValues(reason).Inc() }

// setRevision keeps exactly one recond_source_info series.
func (m *Metrics) setRevision(rev string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rev == m.revision {
		return
	}
	if m.revision != "" {
		m.sourceInfo.DeleteLabelValues(m.revision)
	}
	m.revision = rev
	m.sourceInfo.WithLabelValues(rev).Set(1)
}
