// Package alerts generates recond's Prometheus alerting rules from Go and a
// small Config (stall threshold in intervals, for-durations, severities, the
// selector of recond's targets, the runbook base URL), the way the monitoring
// mixins generate theirs from jsonnet. The output is committed
// (alerts/recond.rules.yaml and deploy/monitoring/prometheusrule.yaml), is
// unit-tested with promtool (alerts/tests), and a test fails when the
// committed files differ from what Generate produces.
package alerts
