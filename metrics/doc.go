// Package metrics exports recond's loop as Prometheus metrics: ticks by
// outcome, the duration of every tick and phase (with the trace id of the
// tick as exemplar), failures by phase and reason, writes by action and
// result, freshness timestamps for alerts, and drift and ownership gauges.
//
// The names are a contract that alerts and dashboards rely on; see
// docs/metrics.md, which a test keeps equal to what is registered here.
// Each metric is defined once, by its entry in families (name, help, type,
// labels and their closed sets); New walks them.
// Nothing is registered globally: New takes the caller's Registerer.
package metrics
