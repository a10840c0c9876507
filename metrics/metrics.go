package metrics

import (
	"context"
	"runtime"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"recond.dev/recond/reconcile"
	"recond.dev/recond/reconcile/health"
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
	// The collectors, each defined (name, help, type, labels) by its entry
	// in families.
	ticks, phaseFailures, stalls, panics, leaseFailures, triggers, events, webhooks, operations *prometheus.CounterVec
	superseded, conflicts, observeCalls, observeSyncWait, watchRestarts                         prometheus.Counter
	skipped, resourcesHealth, healthStatus, sourceInfo, buildInfo                               *prometheus.GaugeVec
	generatedOnce, suspended, suspendedUntil, lastTick, lastSuccess, interval                   prometheus.Gauge
	managed, drifted, terminating, equivalent, leader, cacheAge                                 prometheus.Gauge
	revisionApplied, revisionHealthy, healthTimeout                                             prometheus.Gauge
	phaseDuration                                                                               *prometheus.HistogramVec
	tickDuration, healLatency                                                                   prometheus.Histogram

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

// New creates recond's metrics (families), registers them with reg and
// pre-initialises every labelled series of a closed set, so that alerts and
// rate() see them before the first event.
func New(reg prometheus.Registerer, o Options) *Metrics {
	m := &Metrics{now: time.Now}
	for _, f := range m.families() {
		reg.MustRegister(f.collector())
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
