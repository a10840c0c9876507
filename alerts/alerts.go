package alerts

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Config tunes the generated rules.
type Config struct {
	// StallIntervals is N in "no successful tick in N intervals"; it also
	// bounds RecondLoopNotTicking.
	StallIntervals int
	// Selector is added to every selector, to pick recond's series among
	// others (e.g. `job="recond"`). RecondTargetMissing needs it.
	Selector string
	// GroupBy are the labels that tell two recond instances apart across
	// restarts (the pod label changes, these do not).
	GroupBy []string
	// LookBack is how far back the stall alerts look for a success or a
	// process start, so that a process that restarts before it ever
	// succeeds still alerts. It must exceed StallIntervals intervals.
	LookBack time.Duration
	// FailureWindow is the window over which a phase counts as failing.
	FailureWindow time.Duration
	// ObserveSlowThreshold is the p95 of the observe phase above which
	// RecondObserveSlow fires.
	ObserveSlowThreshold time.Duration
	// For durations of each alert.
	StalledFor, NotTickingFor, PhaseFailingFor, DriftFor, ObserveSlowFor, TargetMissingFor time.Duration
	// DegradedFor is how long the instance must stay degraded (an object
	// failed) before RecondDegraded fires: a shorter flap never does.
	DegradedFor time.Duration
	// RevisionNotHealthyFor is the for: of RecondRevisionNotHealthy. Its
	// threshold is no constant but each instance's --health-timeout
	// (recond_health_timeout_seconds), so the for: only rides out a missed
	// scrape.
	RevisionNotHealthyFor time.Duration
	// AbandonedFor is the for: of RecondTickAbandoned and RecondPanicked:
	// one abandoned tick or one panic is worth a look, so it only rides out
	// a missed scrape.
	AbandonedFor time.Duration
	// SuspendedFor is how long an operator's suspension (recond_suspended
	// == 1) must last before RecondSuspended fires at severity Info.
	SuspendedFor time.Duration
	// SuspendEndingWithin is how close the end of a suspension
	// (recond_suspended_until_timestamp_seconds) must be for
	// RecondSuspended to fire at severity Warning: at its end the loop
	// resumes and undoes the manual changes not committed to Git.
	SuspendEndingWithin time.Duration
	// SuspendEndingFor is the for: of that warning: it only rides out a
	// missed scrape.
	SuspendEndingFor time.Duration
	// Critical, Warning and Info are the severity label values.
	Critical, Warning, Info string
	// RunbookBase is the URL of docs/runbooks.md; each alert links to its
	// section (#<alert name in lower case>).
	RunbookBase string
}

// Default is the configuration of the shipped rules.
func Default() Config {
	return Config{
		StallIntervals:        3,
		Selector:              `job="recond"`,
		GroupBy:               []string{"namespace", "job"},
		LookBack:              6 * time.Hour,
		FailureWindow:         10 * time.Minute,
		ObserveSlowThreshold:  5 * time.Second,
		StalledFor:            5 * time.Minute,
		NotTickingFor:         5 * time.Minute,
		PhaseFailingFor:       15 * time.Minute,
		DriftFor:              15 * time.Minute,
		ObserveSlowFor:        15 * time.Minute,
		TargetMissingFor:      5 * time.Minute,
		DegradedFor:           10 * time.Minute,
		RevisionNotHealthyFor: time.Minute,
		AbandonedFor:          time.Minute,
		SuspendedFor:          time.Hour,
		SuspendEndingWithin:   time.Hour,
		SuspendEndingFor:      time.Minute,
		Critical:              "critical",
		Warning:               "warning",
		Info:                  "info",
		RunbookBase:           "https://recond.dev/docs/runbooks",
	}
}

// RuleFile is a Prometheus rule file.
type RuleFile struct {
	Groups []Group `yaml:"groups" json:"groups"`
}

// Group is a rule group.
type Group struct {
	Name  string `yaml:"name" json:"name"`
	Rules []Rule `yaml:"rules" json:"rules"`
}

// Rule is one alerting rule.
type Rule struct {
	Alert       string            `yaml:"alert" json:"alert"`
	Expr        string            `yaml:"expr" json:"expr"`
	For         string            `yaml:"for,omitempty" json:"for,omitempty"`
	Labels      map[string]string `yaml:"labels" json:"labels"`
	Annotations map[string]string `yaml:"annotations" json:"annotations"`
}

// Rules builds the rule groups for cfg.
func Rules(cfg Config) (RuleFile, error) {
	if cfg.StallIntervals < 1 {
		return RuleFile{}, fmt.Errorf("stall intervals must be at least 1, not %d", cfg.StallIntervals)
	}
	g := &gen{cfg: cfg, by: strings.Join(cfg.GroupBy, ", ")}
	n := cfg.StallIntervals
	rules := []Rule{
		{
			Alert:  "RecondReconcileStalled",
			Expr:   g.stale("recond_last_success_timestamp_seconds") + g.unlessSuspended(),
			For:    dur(cfg.StalledFor),
			Labels: map[string]string{"severity": cfg.Critical},
			Annotations: map[string]string{
				"summary": "recond has not reconciled namespace {{ $labels.namespace }} successfully in " + fmt.Sprint(n) + " intervals.",
				"description": "No tick of recond ({{ $labels.job }}) in namespace {{ $labels.namespace }} has succeeded for " +
					"{{ if gt $value 1e9 }}as long as Prometheus remembers (it never succeeded){{ else }}{{ $value | humanizeDuration }}{{ end }}" +
					", more than " + fmt.Sprint(n) + " reconcile intervals: the namespace is no longer held to Git. " +
					"RecondPhaseFailing says which phase fails and why.",
			},
		},
		{
			Alert:  "RecondLoopNotTicking",
			Expr:   g.stale("recond_last_tick_timestamp_seconds"),
			For:    dur(cfg.NotTickingFor),
			Labels: map[string]string{"severity": cfg.Critical},
			Annotations: map[string]string{
				"summary": "recond in namespace {{ $labels.namespace }} has not finished a tick in " + fmt.Sprint(n) + " intervals.",
				"description": "recond ({{ $labels.job }}) in namespace {{ $labels.namespace }} has finished no tick, successful or not, for " +
					"{{ if gt $value 1e9 }}as long as Prometheus remembers{{ else }}{{ $value | humanizeDuration }}{{ end }}" +
					": the loop is wedged (a tick that never ends, or a process that never gets to tick), not failing.",
			},
		},
		{
			Alert:  "RecondPhaseFailing",
			Expr:   g.increased("recond_phase_failures_total", "phase, reason"),
			For:    dur(cfg.PhaseFailingFor),
			Labels: map[string]string{"severity": cfg.Warning},
			Annotations: map[string]string{
				"summary": "recond's {{ $labels.phase }} phase keeps failing in namespace {{ $labels.namespace }} ({{ $labels.reason }}).",
				"description": "The {{ $labels.phase }} phase of recond ({{ $labels.job }}) in namespace {{ $labels.namespace }} failed " +
					"{{ $value | humanize }} times in the last " + dur(cfg.FailureWindow) + ", with reason {{ $labels.reason }}, and has kept failing for " +
					dur(cfg.PhaseFailingFor) + ". Read: the repository or its credentials; observe: RBAC or the API server; " +
					"diff: the manifests; apply: validation, conflicts or admission.",
			},
		},
		{
			Alert: "RecondDriftPersisting",
			Expr: fmt.Sprintf("min by (%s) (min_over_time(recond_drifted_resources%s[%s])) > 0",
				g.by, g.sel(), dur(cfg.DriftFor)) + g.unlessSuspended(),
			For:    dur(cfg.DriftFor),
			Labels: map[string]string{"severity": cfg.Warning},
			Annotations: map[string]string{
				"summary": "Objects in namespace {{ $labels.namespace }} keep differing from Git.",
				"description": "At every tick for more than " + dur(cfg.DriftFor) + ", at least {{ $value }} objects in namespace " +
					"{{ $labels.namespace }} differed from Git: self-heal is off, or another controller keeps changing what recond applies.",
			},
		},
		{
			Alert: "RecondObserveSlow",
			Expr: fmt.Sprintf("histogram_quantile(0.95, sum by (%s, le) (rate(recond_phase_duration_seconds_bucket%s[%s]))) > %g",
				g.by, g.sel(`phase="observe"`), dur(cfg.FailureWindow), cfg.ObserveSlowThreshold.Seconds()),
			For:    dur(cfg.ObserveSlowFor),
			Labels: map[string]string{"severity": cfg.Warning},
			Annotations: map[string]string{
				"summary": "recond's observe phase is slow in namespace {{ $labels.namespace }}.",
				"description": "The 95th percentile of recond's observe phase (the LISTs of the managed kinds) in namespace " +
					"{{ $labels.namespace }} is {{ $value | humanizeDuration }}, above " + dur(cfg.ObserveSlowThreshold) +
					": the API server is slow or the namespace is large. The exemplars of recond_phase_duration_seconds lead to the slow traces.",
			},
		},
		{
			Alert:  "RecondTargetMissing",
			Expr:   fmt.Sprintf("up%s == 0 or absent(up%s)", g.sel(), g.sel()),
			For:    dur(cfg.TargetMissingFor),
			Labels: map[string]string{"severity": cfg.Critical},
			Annotations: map[string]string{
				"summary": "Prometheus cannot scrape recond{{ with $labels.namespace }} in namespace {{ . }}{{ end }}.",
				"description": "recond's metrics{{ with $labels.namespace }} in namespace {{ . }}{{ end }} have been missing for " + dur(cfg.TargetMissingFor) +
					" (target down, or no target at all): nothing else about the loop can alert.",
			},
		},
		{
			Alert: "RecondDegraded",
			Expr: fmt.Sprintf("max by (%s) (\n  recond_resources_health%s\n  and ignoring (health, status)\n  recond_health_status%s == 1\n)",
				g.by, g.sel(`health="failed"`), g.sel(`status="degraded"`)),
			For:    dur(cfg.DegradedFor),
			Labels: map[string]string{"severity": cfg.Warning},
			Annotations: map[string]string{
				"summary": "Objects recond applied in namespace {{ $labels.namespace }} have failed for " + dur(cfg.DegradedFor) + ".",
				"description": "recond ({{ $labels.job }}) has assessed namespace {{ $labels.namespace }} as degraded at every assessment for " +
					dur(cfg.DegradedFor) + ": {{ $value }} of the objects it applied failed (a rollout past its progress deadline, " +
					"a failed Job, an object in progress for longer than --health-timeout, or a failed health rule). " +
					"Git equals the API server; what runs does not work. The Events with reason HealthDegraded name the objects.",
			},
		},
		{
			Alert: "RecondRevisionNotHealthy",
			Expr: fmt.Sprintf(`max by (%s) (
  (time() - (recond_revision_applied_timestamp_seconds%[2]s > 0))
  > recond_health_timeout_seconds%[2]s
  and
  recond_revision_healthy_timestamp_seconds%[2]s == 0
)`, g.by, g.sel()),
			For:    dur(cfg.RevisionNotHealthyFor),
			Labels: map[string]string{"severity": cfg.Warning},
			Annotations: map[string]string{
				"summary": "The revision recond applied in namespace {{ $labels.namespace }} has not become healthy within its health timeout.",
				"description": "recond ({{ $labels.job }}) applied the current revision in namespace {{ $labels.namespace }} " +
					"{{ $value | humanizeDuration }} ago, longer than its --health-timeout, and it has never been healthy since: " +
					"its objects are still progressing, failed or of unknown health.",
			},
		},
		{
			Alert:  "RecondTickAbandoned",
			Expr:   g.increased("recond_loop_stalls_total", "phase"),
			For:    dur(cfg.AbandonedFor),
			Labels: map[string]string{"severity": cfg.Warning},
			Annotations: map[string]string{
				"summary": "recond abandoned a tick in namespace {{ $labels.namespace }}: its {{ $labels.phase }} phase did not return after its deadline.",
				"description": "recond ({{ $labels.job }}) in namespace {{ $labels.namespace }} abandoned {{ $value | humanize }} tick(s) in the last " +
					dur(cfg.FailureWindow) + ": the {{ $labels.phase }} phase was still running 2s after the tick's deadline (something ignores its context). " +
					"The loop goes on; a process with two such phases still running starts no tick and is restarted by its liveness probe.",
			},
		},
		{
			Alert:  "RecondPanicked",
			Expr:   g.increased("recond_panics_total", "phase"),
			For:    dur(cfg.AbandonedFor),
			Labels: map[string]string{"severity": cfg.Warning},
			Annotations: map[string]string{
				"summary": "recond recovered from a panic in its {{ $labels.phase }} phase in namespace {{ $labels.namespace }}.",
				"description": "recond ({{ $labels.job }}) in namespace {{ $labels.namespace }} recovered from {{ $value | humanize }} panic(s) in its " +
					"{{ $labels.phase }} phase in the last " + dur(cfg.FailureWindow) + ". The tick (or the write) failed with reason other; " +
					"the stack is in the log, next to the tick's trace_id. This is a bug in recond: report it with the stack.",
			},
		},
	}
	rules = append(rules, g.suspended()...)
	for i := range rules {
		rules[i].Annotations["runbook_url"] = cfg.RunbookBase + "#" + strings.ToLower(rules[i].Alert)
	}
	return RuleFile{Groups: []Group{{Name: "recond", Rules: rules}}}, nil
}

type gen struct {
	cfg Config
	by  string
}

// sel returns a selector with the configured matchers and extra ones.
func (g *gen) sel(extra ...string) string {
	var m []string
	if g.cfg.Selector != "" {
		m = append(m, g.cfg.Selector)
	}
	m = append(m, extra...)
	if len(m) == 0 {
		return ""
	}
	return "{" + strings.Join(m, ", ") + "}"
}

// increased is true for the series of the counter metric, summed by the
// group labels and by, that increased in the last FailureWindow.
func (g *gen) increased(metric, by string) string {
	return fmt.Sprintf("sum by (%s, %s) (increase(%s%s[%s])) > 0", g.by, by, metric, g.sel(), dur(g.cfg.FailureWindow))
}

// unlessSuspended is appended to the expressions of the alerts that an
// operator's suspension explains (a suspended loop holds nothing to Git and
// leaves drift as it is, on purpose): they stay silent while the instance
// is suspended, which RecondSuspended tells instead. An instance that
// exports no recond_suspended (an older recond) is not affected.
func (g *gen) unlessSuspended() string {
	return fmt.Sprintf("\nunless on (%[1]s)\nmax by (%[1]s) (recond_suspended%[2]s) == 1", g.by, g.sel())
}

// suspended are the two tiers of RecondSuspended: Info once a suspension
// has lasted SuspendedFor, Warning once its end, when the loop resumes by
// itself and undoes the manual changes not committed to Git, is less than
// SuspendEndingWithin away.
//
// The two tiers never fire together for one instance: their conditions
// split on the time left (>= SuspendEndingWithin for Info, < for Warning),
// so when the Warning starts the Info resolves, rather than two alerts of
// one name saying two things at once, and no Alertmanager inhibit rule is
// needed. Extending the suspension past SuspendEndingWithin resolves the
// Warning; the Info then waits its SuspendedFor again (someone just acted
// on the suspension). A suspension shorter than SuspendEndingWithin is in
// the Warning tier from its start: its end, and the undoing of manual
// changes, is that close. Both tiers carry the time left as their value.
func (g *gen) suspended() []Rule {
	cfg := g.cfg
	left := fmt.Sprintf("max by (%s) (recond_suspended_until_timestamp_seconds%s) - time()", g.by, g.sel())
	on := fmt.Sprintf("and on (%[1]s)\nmax by (%[1]s) (recond_suspended%[2]s) == 1", g.by, g.sel())
	within := cfg.SuspendEndingWithin.Seconds()
	who := "Who suspended it and why: the banner of its status page, `recond status`, or the annotations " +
		"recond.dev/suspended-by and recond.dev/suspend-reason of its inventory ConfigMap."
	return []Rule{
		{
			Alert:  "RecondSuspended",
			Expr:   fmt.Sprintf("(\n  %s >= %g\n)\n%s", left, within, on),
			For:    dur(cfg.SuspendedFor),
			Labels: map[string]string{"severity": cfg.Info},
			Annotations: map[string]string{
				"summary": "recond in namespace {{ $labels.namespace }} has been suspended for more than " + dur(cfg.SuspendedFor) +
					": it writes, prunes and heals nothing.",
				"description": "An operator suspended recond ({{ $labels.job }}) in namespace {{ $labels.namespace }} more than " +
					dur(cfg.SuspendedFor) + " ago: its ticks read, diff and report, and write, prune and heal nothing, " +
					"so changes in Git are not applied and drift stays. The suspension ends by itself in {{ $value | humanizeDuration }}; " +
					"the loop then resumes and undoes the manual changes not committed to Git. " + who +
					" Commit the manual fix to Git, then end the suspension with `recond resume`.",
			},
		},
		{
			Alert:  "RecondSuspended",
			Expr:   fmt.Sprintf("(\n  %s < %g\n)\n%s", left, within, on),
			For:    dur(cfg.SuspendEndingFor),
			Labels: map[string]string{"severity": cfg.Warning},
			Annotations: map[string]string{
				"summary": "recond's suspension in namespace {{ $labels.namespace }} ends in less than " + dur(cfg.SuspendEndingWithin) +
					": manual changes not in Git will then be undone.",
				"description": "recond ({{ $labels.job }}) in namespace {{ $labels.namespace }} is suspended, and the suspension ends by itself in " +
					"{{ $value | humanizeDuration }}: the loop then resumes and undoes every manual change not committed to Git. " + who +
					" Commit the manual fix to Git (then `recond resume`), or extend the suspension with `recond suspend --for` (at most --suspend-max).",
			},
		},
	}
}

// stale is the expression "seconds since the timestamp metric last moved,
// when that is more than N intervals, for a loop running for more than N
// intervals". Both halves look back over LookBack and across restarts (the
// max of the timestamp and the min of the process start per group), so a
// process that restarts before it ever succeeds still alerts, while a fresh
// start does not during its first N intervals.
func (g *gen) stale(metric string) string {
	n := g.cfg.StallIntervals
	lb := dur(g.cfg.LookBack)
	interval := fmt.Sprintf("%d * max by (%s) (recond_interval_seconds%s)", n, g.by, g.sel())
	return fmt.Sprintf(`(
  time() - max by (%[1]s) (max_over_time(%[2]s%[3]s[%[4]s]))
) > on (%[1]s) %[5]s
and on (%[1]s)
(
  time() - min by (%[1]s) (min_over_time(process_start_time_seconds%[3]s[%[4]s]))
) > on (%[1]s) %[5]s`, g.by, metric, g.sel(), lb, interval)
}

// dur formats a duration the way Prometheus writes them (5m, 1h30m, 10s).
func dur(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	var b strings.Builder
	for _, u := range []struct {
		d time.Duration
		s string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}} {
		if d >= u.d {
			fmt.Fprintf(&b, "%d%s", d/u.d, u.s)
			d %= u.d
		}
	}
	return b.String()
}

const header = "# Generated by `make generate` (alerts/gen) from alerts/alerts.go: do not edit.\n"

// YAML renders cfg's rules as a Prometheus rule file.
func YAML(cfg Config) ([]byte, error) {
	rf, err := Rules(cfg)
	if err != nil {
		return nil, err
	}
	return marshal(rf)
}

// PrometheusRule renders cfg's rules as a monitoring.coreos.com/v1
// PrometheusRule for the Prometheus Operator.
func PrometheusRule(cfg Config, name string) ([]byte, error) {
	rf, err := Rules(cfg)
	if err != nil {
		return nil, err
	}
	type meta struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	}
	obj := struct {
		APIVersion string   `yaml:"apiVersion"`
		Kind       string   `yaml:"kind"`
		Metadata   meta     `yaml:"metadata"`
		Spec       RuleFile `yaml:"spec"`
	}{"monitoring.coreos.com/v1", "PrometheusRule", meta{Name: name, Labels: map[string]string{"app.kubernetes.io/name": "recond"}}, rf}
	return marshal(obj)
}

func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString(header)
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Files maps each committed file (relative to the repository root) to its
// generator with the default configuration.
func Files() map[string]func() ([]byte, error) {
	return map[string]func() ([]byte, error){
		"alerts/recond.rules.yaml":              func() ([]byte, error) { return YAML(Default()) },
		"deploy/monitoring/prometheusrule.yaml": func() ([]byte, error) { return PrometheusRule(Default(), "recond") },
	}
}
