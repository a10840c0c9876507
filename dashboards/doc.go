// Package dashboards builds recond's Grafana dashboards as code, with the
// Grafana Foundation SDK, the way alerts builds the alerting rules:
//
//   - recond-overview.json: every namespace at a glance (time since the last
//     successful tick against the stall threshold, firing recond alerts,
//     ticks by outcome, phase failures, drifted and managed objects, versions);
//   - recond-namespace.json: one namespace in depth (phase and tick latency
//     with exemplars, a heatmap of phase durations, outcomes, failures, Git
//     revisions, apply operations, objects).
//
// The JSON is generated into this directory by `go run ./dashboards/gen`
// (make generate) and committed; a test fails when the committed files differ
// from Build's output. Queries and MetricNames read the PromQL back out of
// the files, so that tests can parse every query and compare the metric
// names against what recond exports.
package dashboards
