// Package events turns tick results into Kubernetes Events
// (events.k8s.io/v1): one Event per state transition, never one per
// unchanged tick.
//
// Events about one object (Created, Updated, Pruned, ApplyFailed,
// HealthDegraded, HealthRecovered) regard that object; Events about the
// instance (RevisionApplied, RevisionHealthy, TickFailed, Recovered, and the
// summaries of a capped flood) regard recond's inventory ConfigMap. Tracker
// decides which Events a Result means, with no I/O; Observer records them
// through client-go's events broadcaster and implements reconcile.Observer.
// docs/events.md lists every reason.
package events
