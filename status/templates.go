package status

import (
	"fmt"
	"html/template"
	"strings"
	"time"

	"recond.dev/recond/internal/revision"
)

// pages are the page's templates. Every element is closed explicitly and
// every table has header cells with a scope (a test parses the output).
var pages = template.Must(template.New("").Funcs(template.FuncMap{
	"dur":    func(s float64) string { return formatDuration(time.Duration(s * float64(time.Second))) },
	"short":  short,
	"rfc":    func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"inc":    func(i int) int { return i + 1 },
	"dec":    func(i int) int { return i - 1 },
	"pct":    func(part, total float64) string { return fmt.Sprintf("%.1f%%", share(part, total)) },
	"counts": countsText,
	"join":   strings.Join,
}).Parse(`
{{define "head"}}<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
{{- if .Refresh}}
<meta http-equiv="refresh" content="{{.Refresh}}">{{end}}
<title>{{.Title}}</title>
<style>{{.CSS}}</style>
</head>
<body>
{{end}}

{{define "rev"}}{{if .Rev}}{{if .URL}}<a href="{{.URL}}"><code>{{short .Rev}}</code></a>{{else}}<code title="{{.Rev}}">{{short .Rev}}</code>{{end}}{{else}}<span class="m">none</span>{{end}}{{end}}

{{define "index"}}{{template "head" .}}<header>
<h1>recond: {{.S.Namespace}}/{{.S.Instance}}</h1>
{{- with .S.Suspension}}
<p id="suspended" class="banner" role="status"><strong>Suspended</strong> by <span id="suspended-by">{{.By}}</span>: <span id="suspend-reason">{{.Reason}}</span>. Ticks read, diff and report, and write, prune and heal nothing until <time id="suspended-until" datetime="{{rfc .Until}}">{{rfc .Until}}</time> ({{dur .RemainingSeconds}} left); then the loop resumes by itself. <span class="m">recond resume ends it sooner.</span></p>{{end}}
<dl>
<div><dt>Namespace</dt><dd>{{.S.Namespace}}</dd></div>
<div><dt>Instance</dt><dd>{{.S.Instance}}</dd></div>
<div><dt>Repository</dt><dd>{{.S.Repo}}</dd></div>
<div><dt>Ref</dt><dd>{{.S.Ref}}</dd></div>
{{- if .S.Path}}
<div><dt>Path</dt><dd>{{.S.Path}}</dd></div>{{end}}
{{- with .S.Chart}}
<div><dt>Chart</dt><dd id="chart">{{.Name}} {{.Version}}{{if .Values}} <span class="m">values</span> {{join .Values ", "}}{{end}}</dd></div>{{end}}
<div><dt>Revision</dt><dd id="revision">{{template "rev" .Revision}}</dd></div>
<div><dt>Observe</dt><dd>{{.S.Observe}}</dd></div>
<div><dt>Interval</dt><dd>{{dur .S.IntervalSeconds}}</dd></div>
<div><dt>Health</dt><dd id="health">{{if .S.Health}}<span class="h-{{.S.Health}}">{{.S.Health}}</span>{{else}}<span class="m">not assessed yet</span>{{end}}</dd></div>
<div><dt>Last success</dt><dd id="last-success">{{$.When .S.LastSuccess}}</dd></div>
<div><dt>Next tick</dt><dd id="next-tick">{{if .S.Progress.Running}}tick {{.S.Progress.Started}} running{{else if .S.NextTick}}{{$.Next .S.NextTick}}{{else}}<span class="m">at start</span>{{end}}</dd></div>
</dl>
</header>
<main>
<h2 id="ticks">Last ticks</h2>
<p class="m">Phases: {{range .Phases}}<span class="k p-{{.}}"></span>{{.}}{{end}}<span class="k p-fail"></span>failed phase. Newest first; the bar is the tick, each phase as wide as its share of it.</p>
{{- if .Timeline}}
<table id="timeline">
<thead><tr><th scope="col">Tick</th><th scope="col">Started</th><th scope="col">Phases</th><th scope="col" class="n">Duration</th><th scope="col">Trigger</th><th scope="col">Outcome</th><th scope="col">Revision</th><th scope="col">Changes</th><th scope="col">Failure</th><th scope="col">Trace</th></tr></thead>
<tbody>
{{.Timeline}}</tbody>
</table>
{{- else}}
<p>No tick has ended yet.</p>
{{- end}}
<h2 id="objects">Managed objects</h2>
{{- with .Objects}}
<p class="m">{{.Total}} objects, as the last health assessment saw them.</p>
{{- if .Items}}
<table>
<thead><tr><th scope="col">Kind</th><th scope="col">Name</th><th scope="col">Revision</th><th scope="col">Health</th><th scope="col">Last change</th></tr></thead>
<tbody>
{{$.ObjectRows}}</tbody>
</table>
{{- end}}
{{- if gt .Pages 1}}
<nav aria-label="Object pages">{{if gt .Page 1}}<a href="?page={{dec .Page}}#objects" rel="prev">Previous page</a>{{end}}<span>Page {{.Page}} of {{.Pages}}</span>{{if lt .Page .Pages}}<a href="?page={{inc .Page}}#objects" rel="next">Next page</a>{{end}}</nav>
{{- end}}
{{- end}}
<p class="m"><a href="api/v1/status">This page as JSON</a></p>
</main>
</body>
</html>
{{end}}

{{define "tick"}}{{template "head" .}}{{$t := .R.Detail}}<header>
<h1>Tick #{{$t.ID}}: <span class="o o-{{$t.Outcome}}">{{$t.Outcome}}</span></h1>
<dl>
<div><dt>Instance</dt><dd>{{.S.Namespace}}/{{.S.Instance}}</dd></div>
<div><dt>Started</dt><dd><time datetime="{{rfc $t.Start}}">{{rfc $t.Start}}</time></dd></div>
<div><dt>Duration</dt><dd>{{dur $t.DurationSeconds}}</dd></div>
<div><dt>Trigger</dt><dd>{{$t.Trigger}}</dd></div>
<div><dt>Revision</dt><dd>{{template "rev" .Revision}}</dd></div>
{{- if $t.DryRun}}
<div><dt>Dry run</dt><dd>yes</dd></div>{{end}}
{{- if $t.Health}}
<div><dt>Health</dt><dd><span class="h-{{$t.Health}}">{{$t.Health}}</span></dd></div>{{end}}
<div><dt>Changes</dt><dd>{{counts $t.Counts}}</dd></div>
{{- if $t.Heals}}
<div><dt>Heals</dt><dd>{{$t.Heals}}</dd></div>{{end}}
{{- if $t.TraceURL}}
<div><dt>Trace</dt><dd><a id="trace" href="{{$t.TraceURL}}">trace {{$t.TraceID}}</a></dd></div>{{else if $t.TraceID}}
<div><dt>Trace</dt><dd><code>{{$t.TraceID}}</code></dd></div>{{end}}
</dl>
<p><a href="../">All ticks</a></p>
</header>
<main>
<h2>Phases</h2>
{{template "bars" .R}}
<table>
<thead><tr><th scope="col">Phase</th><th scope="col" class="n">Duration</th><th scope="col" class="n">Share of the tick</th><th scope="col">Result</th></tr></thead>
<tbody>
{{- range $t.Phases}}
<tr><th scope="row">{{.Phase}}</th><td class="n">{{dur .DurationSeconds}}</td><td class="n">{{pct .DurationSeconds $t.DurationSeconds}}</td><td>{{if .Failed}}failed ({{.Reason}}){{if .Aside}}, not the tick's failure{{end}}{{else}}ok{{end}}</td></tr>
{{- end}}
</tbody>
</table>
{{- with $t.Failure}}
<h2 id="error">Error</h2>
<pre>{{.Message}}</pre>
{{- end}}
<h2 id="changes">Changes</h2>
{{- if $t.Changes}}
{{- range $t.Changes}}
<h3>{{.Action}} {{.Kind}}/{{.Name}}{{if .Uncertain}} <span class="m">(confirmed by the server)</span>{{end}}</h3>
{{- if .Fields}}
<table>
<thead><tr><th scope="col">Field</th><th scope="col">Live</th><th scope="col">Desired</th></tr></thead>
<tbody>
{{- range .Fields}}
<tr><th scope="row"><code>{{.Path}}</code></th><td><code>{{if .Live}}{{.Live}}{{else}}<span class="m">(absent)</span>{{end}}</code></td><td><code>{{if .Desired}}{{.Desired}}{{else}}<span class="m">(absent)</span>{{end}}</code></td></tr>
{{- end}}
</tbody>
</table>
{{- end}}
{{- if .MoreFields}}
<p class="m">and {{.MoreFields}} more fields</p>{{end}}
{{- end}}
{{- if $t.MoreChanges}}
<p class="m">and {{$t.MoreChanges}} more objects</p>{{end}}
{{- else}}
<p>No difference from Git.</p>
{{- end}}
<h2 id="operations">Operations</h2>
{{- if $t.Operations}}
{{template "ops" $t.Operations}}
{{- if $t.MoreOperations}}
<p class="m">and {{$t.MoreOperations}} more operations</p>{{end}}
{{- else}}
<p>No write.</p>
{{- end}}
{{- if $t.Rejected}}
<h2 id="rejected">Refused by the validating dry run</h2>
{{template "ops" $t.Rejected}}
{{- end}}
{{- if or $t.Terminating $t.Equivalent $t.BackingOff $t.Skipped $t.Orphaned}}
<h2>Objects left alone</h2>
<ul>
{{- range $t.Terminating}}
<li>{{.}}: terminating</li>{{end}}
{{- range $t.Equivalent}}
<li>{{.}}: the server showed applying it changes nothing</li>{{end}}
{{- range $t.BackingOff}}
<li>{{.}}: self-heal backing off (another manager keeps changing it)</li>{{end}}
{{- range $t.Skipped}}
<li>{{.}}: skipped by its opt-out annotation</li>{{end}}
{{- range $t.Orphaned}}
<li>{{.}}: orphaned, not deleted (recond.dev/prune: disabled)</li>{{end}}
</ul>
{{- end}}
</main>
</body>
</html>
{{end}}

{{define "rowhead"}}<tr><th scope="row"><a href="ticks/{{.Detail.ID}}">#{{.Detail.ID}}</a></th>{{end}}

{{define "rowtail"}}{{$t := .Detail}}<td>{{template "bars" .}}</td><td class="n">{{dur $t.DurationSeconds}}</td><td>{{$t.Trigger}}</td><td><span class="o o-{{$t.Outcome}}">{{$t.Outcome}}</span>{{if $t.DryRun}} <span class="m">dry run</span>{{end}}</td><td>{{if $t.Revision}}<code>{{short $t.Revision}}</code>{{end}}</td><td>{{counts $t.Counts}}</td><td>{{.Summary}}</td><td>{{if $t.TraceURL}}<a href="{{$t.TraceURL}}">trace<span class="sr"> #{{$t.ID}}</span></a>{{end}}</td></tr>{{end}}

{{define "bars"}}<div class="g" role="img" aria-label="{{.Label}}">{{range .Bars}}<i class="{{.Class}}" style="{{.Style}}"></i>{{end}}</div>{{end}}

{{define "objhead"}}<tr><td>{{.Kind}}</td><th scope="row">{{.Name}}</th><td>{{if .Revision}}<code>{{short .Revision}}</code>{{end}}</td><td><span class="h-{{.Health}}">{{.Health}}</span>{{if .Message}} <span class="m">{{.Message}}</span>{{end}}</td>{{end}}

{{define "ops"}}<table>
<thead><tr><th scope="col">Action</th><th scope="col">Object</th><th scope="col" class="n">Duration</th><th scope="col">Fields</th><th scope="col">Error</th></tr></thead>
<tbody>
{{- range .}}
<tr><td>{{.Action}}</td><th scope="row">{{.Kind}}/{{.Name}}</th><td class="n">{{dur .DurationSeconds}}</td><td>{{range $i, $f := .Fields}}{{if $i}}, {{end}}<code>{{$f}}</code>{{end}}</td><td>{{if .Error}}<pre>{{.Error}}</pre>{{else}}ok{{end}}</td></tr>
{{- end}}
</tbody>
</table>{{end}}

{{define "missing"}}{{template "head" .}}<header>
<h1>Tick #{{.ID}}</h1>
</header>
<main>
<h2>Not available</h2>
<p>{{.Message}}</p>
<p><a href="../">All ticks</a></p>
</main>
</body>
</html>
{{end}}
`))

// short is a revision cut to 7 hex digits, as git abbreviates a commit.
func short(rev string) string { return revision.Abbrev(rev, 7) }

// formatDuration writes d with a precision that fits its size.
func formatDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
	return d.Round(time.Second).String()
}

// relative writes d (positive) coarsely: 12s, 3m, 2h, 4d.
func relative(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// share is part as a percentage of total.
func share(part, total float64) float64 {
	if total <= 0 {
		return 0
	}
	return part * 100 / total
}

// countsText says what a tick changed in a few words.
func countsText(c Counts) string {
	var parts []string
	for _, n := range []struct {
		n    int
		what string
	}{{c.Created, "created"}, {c.Updated, "updated"}, {c.Pruned, "pruned"}, {c.Refused, "refused"}, {c.NotWritten, "not written"}} {
		if n.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n.n, n.what))
		}
	}
	switch {
	case len(parts) > 0:
		return strings.Join(parts, ", ")
	case c.Drifted > 0:
		return fmt.Sprintf("%d drifted, not written", c.Drifted)
	}
	return "none"
}
