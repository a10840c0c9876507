package main

import (
	"fmt"
	"io"

	"recond.dev/recond/alerts"
)

// printAlerts writes the alerting rules for another configuration than the
// shipped one (alerts/recond.rules.yaml is the default).
func printAlerts(args []string, stdout, stderr io.Writer) int {
	cfg := alerts.Default()
	fs := commandFlags("recond alerts", stderr)
	fs.IntVar(&cfg.StallIntervals, "stall-intervals", cfg.StallIntervals, "intervals without a successful tick before RecondReconcileStalled")
	fs.StringVar(&cfg.Selector, "selector", cfg.Selector, "label matchers selecting recond's series (and targets, for RecondTargetMissing)")
	fs.StringVar(&cfg.RunbookBase, "runbook-base", cfg.RunbookBase, "URL of the runbooks page")
	fs.DurationVar(&cfg.StalledFor, "stalled-for", cfg.StalledFor, "for: of RecondReconcileStalled")
	fs.DurationVar(&cfg.PhaseFailingFor, "phase-failing-for", cfg.PhaseFailingFor, "for: of RecondPhaseFailing")
	fs.DurationVar(&cfg.DegradedFor, "degraded-for", cfg.DegradedFor, "for: of RecondDegraded (how long the instance stays degraded before it fires)")
	fs.DurationVar(&cfg.ObserveSlowThreshold, "observe-slow-threshold", cfg.ObserveSlowThreshold, "p95 of the observe phase above which RecondObserveSlow fires")
	promRule := fs.Bool("prometheus-rule", false, "print a monitoring.coreos.com/v1 PrometheusRule instead of a rule file")
	if code, ok := parseCommand(fs, args); !ok {
		return code
	}
	var (
		b   []byte
		err error
	)
	if *promRule {
		b, err = alerts.PrometheusRule(cfg, "recond")
	} else {
		b, err = alerts.YAML(cfg)
	}
	if err != nil {
		fmt.Fprintf(stderr, "recond alerts: %v\n", err)
		return 2
	}
	_, _ = stdout.Write(b)
	return 0
}
