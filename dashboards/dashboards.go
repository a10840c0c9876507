package dashboards

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/heatmap"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/statetimeline"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"

	"recond.dev/recond/alerts"
)

// File names and uids of the generated dashboards.
const (
	OverviewFile  = "recond-overview.json"
	NamespaceFile = "recond-namespace.json"
	OverviewUID   = "recond-overview"
	NamespaceUID  = "recond-namespace"
)

// stallIntervals is the stall threshold of RecondReconcileStalled, in
// intervals: the shipped rules'.
var stallIntervals = alerts.Default().StallIntervals

// ds is the data source of every panel and target: the ${datasource}
// template variable.
var ds = common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}

// Build returns the dashboards, file name → indented JSON with a trailing
// newline. The output is deterministic: the same code gives the same bytes.
func Build() (map[string][]byte, error) {
	files := map[string][]byte{}
	for name, b := range map[string]*dashboard.DashboardBuilder{
		OverviewFile:  overview(),
		NamespaceFile: namespace(),
	} {
		d, err := b.Build()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		numberPanels(d.Panels)
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(d); err != nil { // Encode ends with a newline.
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		files[name] = unescapeHTML(buf.Bytes())
	}
	return files, nil
}

// overview is every namespace at a glance.
func overview() *dashboard.DashboardBuilder {
	return newDashboard(OverviewUID, "recond / Overview", "recond in every namespace: is each one held to Git?", true).
		WithRow(dashboard.NewRowBuilder("Health")).
		WithPanel(statPanel("Stalled namespaces", "none", redFrom(1),
			instant(fmt.Sprintf(`count(time() - max by (namespace) (recond_last_success_timestamp_seconds{namespace=~"$namespace"}) > %d * max by (namespace) (recond_interval_seconds{namespace=~"$namespace"})) or vector(0)`, stallIntervals), "stalled")).
			Description(fmt.Sprintf("Namespaces whose last successful tick is older than %[1]d intervals, or where no tick succeeded since recond started: what RecondReconcileStalled alerts on (the alert also waits %[1]d intervals after a restart).", stallIntervals)).
			Height(8).
			Span(4)).
		WithPanel(tablePanel("Time since last success vs stall threshold", nil,
			rows(`time() - max by (namespace) (recond_last_success_timestamp_seconds{namespace=~"$namespace"})`),
			rows(fmt.Sprintf(`%d * max by (namespace) (recond_interval_seconds{namespace=~"$namespace"})`, stallIntervals)),
			rows(fmt.Sprintf(`(time() - max by (namespace) (recond_last_success_timestamp_seconds{namespace=~"$namespace"} > 0)) / (%d * max by (namespace) (recond_interval_seconds{namespace=~"$namespace"}))`, stallIntervals))).
			Description("Per namespace: time since the last successful tick, the stall threshold, and how much of it is used (100% = stalled). \"never\": no tick has succeeded since the process started.").
			OverrideByName(column("Value #A", "Since last success", "s", mappings(never()))).
			OverrideByName(column("Value #B", "Stall threshold", "s")).
			OverrideByName(column("Value #C", "Of threshold", "percentunit",
				dashboard.DynamicConfigValue{Id: "thresholds", Value: thresholds(step("green", nil), step("orange", cog.ToPtr(0.67)), step("red", cog.ToPtr(1.0)))},
				dashboard.DynamicConfigValue{Id: "custom.cellOptions", Value: common.TableColoredBackgroundCellOptions{Type: common.TableCellDisplayModeColorBackground}})).
			Span(12)).
		WithPanel(tablePanel("Firing recond alerts", []string{"Value"},
			rows(`sum by (alertname, namespace, severity) (ALERTS{alertname=~"Recond.*", alertstate="firing"})`)).
			Description("Prometheus's ALERTS series for the recond alerts that fire now, in every namespace.").
			NoValue("none firing").
			Span(8)).
		WithPanel(healthTimelinePanel("Health by namespace", "namespace", `namespace=~"$namespace"`, "{{namespace}}").
			Description("Each namespace's health at every assessment (the health phase after apply): healthy, progressing, unknown or degraded (an object failed); \"not assessed\" before the first assessment. RecondDegraded fires after a degraded spell that lasts its for: duration.")).
		WithRow(dashboard.NewRowBuilder("Activity")).
		WithPanel(timeseriesPanel("Ticks by outcome", "ops",
			series(`sum by (namespace, outcome) (rate(recond_ticks_total{namespace=~"$namespace"}[$__rate_interval]))`, "{{namespace}} {{outcome}}"))).
		WithPanel(timeseriesPanel("Phase failures by phase and reason", "ops",
			series(`sum by (namespace, phase, reason) (rate(recond_phase_failures_total{namespace=~"$namespace"}[$__rate_interval]))`, "{{namespace}} {{phase}} {{reason}}"))).
		WithRow(dashboard.NewRowBuilder("Objects")).
		WithPanel(timeseriesPanel("Drifted objects", "none",
			series(`max by (namespace) (recond_drifted_resources{namespace=~"$namespace"})`, "{{namespace}}")).
			Description("Objects that differed from Git at the last diff.")).
		WithPanel(timeseriesPanel("Managed objects", "none",
			series(`max by (namespace) (recond_managed_resources{namespace=~"$namespace"})`, "{{namespace}}")).
			Description("Objects recond owns.")).
		WithPanel(timeseriesPanel("Unhealthy objects", "none",
			series(`max by (namespace, health) (recond_resources_health{namespace=~"$namespace", health!="current"})`, "{{namespace}} {{health}}")).
			Description(unhealthyDescription).
			Span(24)).
		WithRow(dashboard.NewRowBuilder("Versions")).
		WithPanel(tablePanel("recond versions", []string{"Value"},
			rows(`count by (namespace, version, goversion) (recond_build_info{namespace=~"$namespace"})`)).
			Span(24))
}

// namespace is one namespace in depth.
func namespace() *dashboard.DashboardBuilder {
	return newDashboard(NamespaceUID, "recond / Namespace", "recond in one namespace: latency, outcomes, failures, revisions and writes.", false).
		WithRow(dashboard.NewRowBuilder("Loop")).
		WithPanel(statPanel("Loop", "s", nil,
			instant(`time() - max(recond_last_tick_timestamp_seconds{namespace="$namespace"})`, "since last tick"),
			instant(`time() - max(recond_last_success_timestamp_seconds{namespace="$namespace"})`, "since last success"),
			instant(fmt.Sprintf(`%d * max(recond_interval_seconds{namespace="$namespace"})`, stallIntervals), "stall threshold")).
			Description(fmt.Sprintf("Time since the last tick and the last successful tick, against the stall threshold (%d intervals). \"never\": none since the process started.", stallIntervals)).
			Mappings([]dashboard.ValueMapping{never()}).
			Span(16)).
		WithPanel(statPanel("Revisions in range", "none", nil,
			instant(`count(count by (revision) (count_over_time(recond_source_info{namespace="$namespace"}[$__range])))`, "revisions")).
			Description("Distinct Git revisions read in the time range: 1 means no change. (changes() of recond_source_info is always 0: its value is always 1, the revision is a label.)").
			Span(8)).
		WithRow(dashboard.NewRowBuilder("Health")).
		WithPanel(healthTimelinePanel("Instance health", "", `namespace="$namespace"`, "health").
			Description("The instance's health at every assessment (the health phase after apply; the worst of its objects): healthy, progressing, unknown or degraded (an object failed); \"not assessed\" before the first assessment.")).
		WithPanel(healthColors(timeseriesPanel("Objects by health", "none",
			series(`max by (health) (recond_resources_health{namespace="$namespace"})`, "{{health}}")).
			Description("Objects recond manages, by health at the last assessment: current, in_progress, failed, terminating, unknown."))).
		WithPanel(statPanel("Unhealthy objects", "none", []dashboard.Threshold{step("green", nil), step("orange", cog.ToPtr(1.0))},
			instant(`max by (health) (recond_resources_health{namespace="$namespace", health!="current"})`, "{{health}}")).
			Description(unhealthyDescription).
			OverrideByName("failed", []dashboard.DynamicConfigValue{{Id: "thresholds", Value: thresholds(step("green", nil), step("red", cog.ToPtr(1.0)))}}).
			Height(8).
			Span(12)).
		WithRow(dashboard.NewRowBuilder("Latency")).
		WithPanel(latencyPanel("Phase latency", "recond_phase_duration_seconds", "phase")).
		WithPanel(latencyPanel("Tick duration", "recond_tick_duration_seconds", "")).
		WithPanel(heatmapPanel("Phase durations",
			`sum by (le) (increase(recond_phase_duration_seconds_bucket{namespace="$namespace"}[$__rate_interval]))`).
			Description("How many phases (read, observe, diff, apply together) took how long, per bucket; the dots are exemplars.")).
		WithRow(dashboard.NewRowBuilder("Outcomes")).
		WithPanel(timeseriesPanel("Ticks by outcome", "ops",
			series(`sum by (outcome) (rate(recond_ticks_total{namespace="$namespace"}[$__rate_interval]))`, "{{outcome}}"))).
		WithPanel(timeseriesPanel("Phase failures by phase and reason", "ops",
			series(`sum by (phase, reason) (rate(recond_phase_failures_total{namespace="$namespace"}[$__rate_interval]))`, "{{phase}} {{reason}}"))).
		WithPanel(timeseriesPanel("Abandoned ticks, panics and watch restarts", "none",
			series(`sum by (phase) (increase(recond_loop_stalls_total{namespace="$namespace"}[$__rate_interval]))`, "abandoned in {{phase}}"),
			series(`sum by (phase) (increase(recond_panics_total{namespace="$namespace"}[$__rate_interval]))`, "panic in {{phase}}"),
			series(`sum(increase(recond_watch_restarts_total{namespace="$namespace"}[$__rate_interval]))`, "watch restarts")).
			Description("Ticks abandoned because a phase did not return within 2 s of the deadline (RecondTickAbandoned), recovered panics (RecondPanicked), and watch caches restarted after --watch-stale-after without an event or bookmark. All three are 0 in a healthy loop; watch restarts also count quiet kinds, which get no bookmarks.")).
		WithRow(dashboard.NewRowBuilder("Source and objects")).
		WithPanel(timelinePanel("Git revision",
			series(`max by (revision) (recond_source_info{namespace="$namespace"})`, "{{revision}}"))).
		WithPanel(timeseriesPanel("Apply operations by action and result", "ops",
			series(`sum by (action, result) (rate(recond_resource_operations_total{namespace="$namespace"}[$__rate_interval]))`, "{{action}} {{result}}"))).
		WithPanel(timeseriesPanel("Objects", "none",
			series(`max(recond_managed_resources{namespace="$namespace"})`, "managed"),
			series(`max(recond_drifted_resources{namespace="$namespace"})`, "drifted")).
			Description("Objects recond owns, and those that differed from Git at the last diff."))
}

// newDashboard has what both dashboards share: tags, time, links, and the
// datasource and namespace variables (several namespaces, or one).
func newDashboard(uid, title, description string, multi bool) *dashboard.DashboardBuilder {
	return dashboard.NewDashboardBuilder(title).
		Uid(uid).
		Description(description).
		Tags([]string{"recond"}).
		Time("now-6h", "now").
		Refresh("1m").
		Timezone(common.TimeZoneBrowser).
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Link(dashboard.NewDashboardLinkBuilder("recond").
			Type(dashboard.DashboardLinkTypeDashboards).
			Icon("external link").
			Tooltip("recond dashboards").
			Tags([]string{"recond"}).
			AsDropdown(true).
			IncludeVars(true).
			KeepTime(true)).
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").
			Label("Data source").
			Type("prometheus")).
		WithVariable(dashboard.NewQueryVariableBuilder("namespace").
			Label("Namespace").
			Datasource(ds).
			Query(dashboard.StringOrMap{String: cog.ToPtr("label_values(recond_build_info, namespace)")}).
			Definition("label_values(recond_build_info, namespace)").
			Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
			Sort(dashboard.VariableSortAlphabeticalAsc).
			Multi(multi).
			IncludeAll(multi))
}

// query is one Prometheus target; the panel helpers give them refIds A, B, C…
type query struct {
	expr, legend string
	instant      bool                       // evaluated at the end of the range only
	format       prometheus.PromQueryFormat // time_series unless set
	exemplar     bool
}

// series is a range query, one line per label set.
func series(expr, legend string) query { return query{expr: expr, legend: legend} }

// instant is an instant query, for stats.
func instant(expr, legend string) query { return query{expr: expr, legend: legend, instant: true} }

// rows is an instant query in table format, for tables.
func rows(expr string) query {
	return query{expr: expr, instant: true, format: prometheus.PromQueryFormatTable}
}

func targets(qs []query) []cog.Builder[variants.Dataquery] {
	out := make([]cog.Builder[variants.Dataquery], 0, len(qs))
	for i, q := range qs {
		t := prometheus.NewDataqueryBuilder().
			RefId(string(rune('A' + i))).
			Datasource(ds).
			EditorMode(prometheus.QueryEditorModeCode).
			Expr(q.expr)
		if q.instant {
			t.Instant()
		} else {
			t.Range()
		}
		if q.format != "" {
			t.Format(q.format)
		}
		if q.legend != "" {
			t.LegendFormat(q.legend)
		}
		if q.exemplar {
			t.Exemplar(true)
		}
		out = append(out, t)
	}
	return out
}

func timeseriesPanel(title, unit string, qs ...query) *timeseries.PanelBuilder {
	return timeseries.NewPanelBuilder().
		Title(title).
		Datasource(ds).
		Targets(targets(qs)).
		Unit(unit).
		Min(0).
		FillOpacity(10).
		ShowPoints(common.VisibilityModeNever).
		Legend(common.NewVizLegendOptionsBuilder().
			ShowLegend(true).
			DisplayMode(common.LegendDisplayModeList).
			Placement(common.LegendPlacementBottom)).
		Tooltip(common.NewVizTooltipOptionsBuilder().
			Mode(common.TooltipDisplayModeMulti).
			Sort(common.SortOrderDescending)).
		Height(8).
		Span(12)
}

// latencyPanel draws the p50, p95 and p99 of a histogram's classic buckets,
// per label by (none if empty), with exemplars (trace ids) on every target.
func latencyPanel(title, histogram, by string) *timeseries.PanelBuilder {
	groups, legend := "le", ""
	if by != "" {
		groups, legend = "le, "+by, "{{"+by+"}} "
	}
	var qs []query
	for _, q := range []struct{ quantile, name string }{{"0.5", "p50"}, {"0.95", "p95"}, {"0.99", "p99"}} {
		qs = append(qs, query{
			expr:     fmt.Sprintf(`histogram_quantile(%s, sum by (%s) (rate(%s_bucket{namespace="$namespace"}[$__rate_interval])))`, q.quantile, groups, histogram),
			legend:   legend + q.name,
			exemplar: true,
		})
	}
	return timeseriesPanel(title, "s", qs...).
		Description("p50, p95 and p99 from the classic buckets; the dots are exemplars: click one for its trace.")
}

// heatmapPanel draws a histogram's classic buckets as they are (bucket format,
// no calculation), with exemplars.
func heatmapPanel(title, expr string) *heatmap.PanelBuilder {
	return heatmap.NewPanelBuilder().
		Title(title).
		Datasource(ds).
		Targets(targets([]query{{expr: expr, legend: "{{le}}", format: prometheus.PromQueryFormatHeatmap, exemplar: true}})).
		Calculate(false).
		YAxis(heatmap.NewYAxisConfigBuilder().Unit("s")).
		CellValues(heatmap.NewCellValuesBuilder().Unit("none")).
		Tooltip(heatmap.NewHeatmapTooltipBuilder().Mode(common.TooltipDisplayModeSingle).YHistogram(true)).
		Height(9).
		Span(24)
}

// statPanel shows the last value of each query; with steps, on a background
// of the threshold's color, else in the text color (or a mapping's).
func statPanel(title, unit string, steps []dashboard.Threshold, qs ...query) *stat.PanelBuilder {
	colorMode := common.BigValueColorModeBackground
	if steps == nil {
		colorMode, steps = common.BigValueColorModeValue, []dashboard.Threshold{step("text", nil)}
	}
	return stat.NewPanelBuilder().
		Title(title).
		Datasource(ds).
		Targets(targets(qs)).
		Unit(unit).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"})).
		GraphMode(common.BigValueGraphModeNone).
		TextMode(common.BigValueTextModeValueAndName).
		ColorMode(colorMode).
		Thresholds(dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).Steps(steps)).
		Orientation(common.VizOrientationAuto).
		Height(5)
}

// tablePanel merges its instant queries into one row per label set and
// hides the Time column and the columns named in hide.
func tablePanel(title string, hide []string, qs ...query) *table.PanelBuilder {
	excluded := map[string]bool{"Time": true}
	for _, h := range hide {
		excluded[h] = true
	}
	return table.NewPanelBuilder().
		Title(title).
		Datasource(ds).
		Targets(targets(qs)).
		Footer(common.NewTableFooterOptionsBuilder().Show(false).Reducer([]string{})).
		WithTransformation(dashboard.DataTransformerConfig{Id: "merge", Options: map[string]any{}}).
		WithTransformation(dashboard.DataTransformerConfig{Id: "organize", Options: map[string]any{"excludeByName": excluded}}).
		Height(8)
}

// timelinePanel draws one row per series, filled while it exists: for info
// metrics such as recond_source_info, whose labels are the state.
func timelinePanel(title string, q query) *statetimeline.PanelBuilder {
	return statetimeline.NewPanelBuilder().
		Title(title).
		Datasource(ds).
		Targets(targets([]query{q})).
		ShowValue(common.VisibilityModeNever).
		MergeValues(true).
		Legend(common.NewVizLegendOptionsBuilder().ShowLegend(false).DisplayMode(common.LegendDisplayModeHidden).Placement(common.LegendPlacementBottom)).
		Tooltip(common.NewVizTooltipOptionsBuilder().Mode(common.TooltipDisplayModeSingle).Sort(common.SortOrderNone)).
		Height(6).
		Span(24)
}

// unhealthyDescription explains the unhealthy objects panels, and where the
// objects' names are.
const unhealthyDescription = "Objects recond manages whose health at the last assessment is not current, by health (in_progress, failed, terminating, unknown). " +
	"Object names are not metric labels, by design: labels come from closed sets, and a series per object would grow without bound. " +
	"The objects are named in the Events with reason HealthDegraded (kubectl get events --field-selector reason=HealthDegraded -n NAMESPACE) " +
	"and in the unhealthy field of the tick log line (kind/name, health and reason)."

// healthCodes are the values of healthExpr, worst last, with their text and
// color; 0 is an instance not assessed yet (every status 0).
var healthCodes = []struct {
	status, color string
}{{"healthy", "green"}, {"progressing", "blue"}, {"unknown", "orange"}, {"degraded", "red"}}

// healthExpr turns recond_health_status (1 for the current status, 0 for
// the others) into one series per group whose value is the status's code
// in healthCodes (1 healthy … 4 degraded, 0 not assessed), for a state
// timeline. The max keeps the worst status when two processes overlap (a
// rolling restart).
func healthExpr(by, matchers string) string {
	terms := make([]string, len(healthCodes))
	for i, c := range healthCodes {
		terms[i] = fmt.Sprintf(`%d * recond_health_status{%s, status="%s"}`, i+1, matchers, c.status)
	}
	agg := "max"
	if by != "" {
		agg = "max by (" + by + ")"
	}
	return agg + " (" + strings.Join(terms, " or ") + ")"
}

// healthTimelinePanel draws healthExpr as a state timeline, one row per
// group (by; one row if empty), each state in its color.
func healthTimelinePanel(title, by, matchers, legend string) *statetimeline.PanelBuilder {
	options := map[string]dashboard.ValueMappingResult{
		"0": {Text: cog.ToPtr("not assessed"), Color: cog.ToPtr("text"), Index: cog.ToPtr(int32(0))},
	}
	for i, c := range healthCodes {
		options[fmt.Sprint(i+1)] = dashboard.ValueMappingResult{Text: cog.ToPtr(c.status), Color: cog.ToPtr(c.color), Index: cog.ToPtr(int32(i + 1))}
	}
	return statetimeline.NewPanelBuilder().
		Title(title).
		Datasource(ds).
		Targets(targets([]query{series(healthExpr(by, matchers), legend)})).
		ShowValue(common.VisibilityModeNever).
		MergeValues(true).
		Mappings([]dashboard.ValueMapping{{ValueMap: &dashboard.ValueMap{Type: dashboard.MappingTypeValueToText, Options: options}}}).
		ColorScheme(dashboard.NewFieldColorBuilder().Mode(dashboard.FieldColorModeIdFixed).FixedColor("text")).
		Legend(common.NewVizLegendOptionsBuilder().ShowLegend(false).DisplayMode(common.LegendDisplayModeHidden).Placement(common.LegendPlacementBottom)).
		Tooltip(common.NewVizTooltipOptionsBuilder().Mode(common.TooltipDisplayModeSingle).Sort(common.SortOrderNone)).
		Height(6).
		Span(24)
}

// healthColors gives each object health's series its color.
func healthColors(p *timeseries.PanelBuilder) *timeseries.PanelBuilder {
	for _, c := range []struct{ health, color string }{
		{"current", "green"}, {"in_progress", "blue"}, {"failed", "red"}, {"terminating", "purple"}, {"unknown", "orange"},
	} {
		p.OverrideByName(c.health, []dashboard.DynamicConfigValue{{Id: "color", Value: map[string]string{"mode": "fixed", "fixedColor": c.color}}})
	}
	return p
}

// column renders a table's value column (Grafana names them "Value #<refId>"
// when several queries are merged) with a title, a unit and more properties.
func column(field, title, unit string, more ...dashboard.DynamicConfigValue) (string, []dashboard.DynamicConfigValue) {
	return field, append([]dashboard.DynamicConfigValue{
		{Id: "displayName", Value: title},
		{Id: "unit", Value: unit},
	}, more...)
}

func mappings(m ...dashboard.ValueMapping) dashboard.DynamicConfigValue {
	return dashboard.DynamicConfigValue{Id: "mappings", Value: m}
}

// never shows "never" for time() - t when t is 0 (the timestamp gauges
// before the first tick): ages above 1e9 s (31 years) are not real.
func never() dashboard.ValueMapping {
	return dashboard.ValueMapping{RangeMap: &dashboard.RangeMap{
		Type: dashboard.MappingTypeRangeToText,
		Options: dashboard.DashboardRangeMapOptions{
			From:   cog.ToPtr(1e9),
			Result: dashboard.ValueMappingResult{Text: cog.ToPtr("never"), Color: cog.ToPtr("red")},
		},
	}}
}

func step(color string, from *float64) dashboard.Threshold {
	return dashboard.Threshold{Color: color, Value: from}
}

func thresholds(steps ...dashboard.Threshold) dashboard.ThresholdsConfig {
	return dashboard.ThresholdsConfig{Mode: dashboard.ThresholdsModeAbsolute, Steps: steps}
}

// redFrom is green below n and red from n.
func redFrom(n float64) []dashboard.Threshold {
	return []dashboard.Threshold{step("green", nil), step("red", &n)}
}

// numberPanels gives every panel and row an id, in order.
func numberPanels(panels []dashboard.PanelOrRowPanel) {
	var id uint32
	for _, p := range panels {
		id++
		if p.Panel != nil {
			p.Panel.Id = cog.ToPtr(id)
			continue
		}
		p.RowPanel.Id = id
		for i := range p.RowPanel.Panels {
			id++
			p.RowPanel.Panels[i].Id = cog.ToPtr(id)
		}
	}
}

// unescapeHTML undoes the \u003c, \u003e and \u0026 escapes that the SDK's
// own MarshalJSON methods write, so that PromQL reads as written ("> 0").
func unescapeHTML(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 == len(b) {
			out = append(out, b[i])
			continue
		}
		if b[i+1] == 'u' && i+6 <= len(b) {
			switch string(b[i+2 : i+6]) {
			case "003c":
				out, i = append(out, '<'), i+5
				continue
			case "003e":
				out, i = append(out, '>'), i+5
				continue
			case "0026":
				out, i = append(out, '&'), i+5
				continue
			}
		}
		out, i = append(out, b[i], b[i+1]), i+1 // any other escape, kept whole
	}
	return out
}
