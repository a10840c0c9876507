package status

import (
	"fmt"
	"strings"
	"time"

	"recond.dev/recond/reconcile"
)

// The page's HTML, written by hand: every element is closed explicitly and
// every table has header cells with a scope (a test parses the output).
// Values reach it only through hw's escapes (escape.go).

// view is what a page is written from.
type view struct {
	S        *Status
	Title    string
	Refresh  int // seconds; 0: no refresh
	Revision revLink
	// ticks are the timeline's records, newest first; objects the set
	// whose items S.Objects.Items are (nil: none).
	ticks   []*record
	objects *objectSet
	R       *record // the tick page's
	// ID and Message are the page of a tick that is not available.
	ID      uint64
	Message string
	now     time.Time
}

// revLink is a revision and, when a template is set, its commit URL.
type revLink struct{ Rev, URL string }

// writeHead writes the page up to <body>.
func writeHead(h hw, v *view) {
	h.m("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n" +
		"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">")
	if v.Refresh != 0 {
		h.m("\n<meta http-equiv=\"refresh\" content=\"")
		h.n(v.Refresh)
		h.m("\">")
	}
	h.m("\n<title>")
	h.t(v.Title)
	h.m("</title>\n<style>")
	h.m(css)
	h.m("</style>\n</head>\n<body>\n")
}

// writeTail closes the page.
func writeTail(h hw) { h.m("\n</main>\n</body>\n</html>\n") }

// writeRev writes a revision, linked when it has a URL.
func writeRev(h hw, r revLink) {
	switch {
	case r.Rev == "":
		h.m(`<span class="m">none</span>`)
	case r.URL != "":
		h.m(`<a href="`)
		h.u(r.URL)
		h.m(`"><code>`)
		h.t(short(r.Rev))
		h.m(`</code></a>`)
	default:
		h.m(`<code title="`)
		h.t(r.Rev)
		h.m(`">`)
		h.t(short(r.Rev))
		h.m(`</code>`)
	}
}

// dd writes one term of a header's list with a value as text.
func dd(h hw, term markup, value string) {
	h.m("\n<div><dt>")
	h.m(term)
	h.m("</dt><dd>")
	h.t(value)
	h.m("</dd></div>")
}

// writeIndex writes the main page: the header, the timeline and one page
// of the managed objects.
func writeIndex(h hw, v *view) {
	s := v.S
	writeHead(h, v)
	h.m("<header>\n<h1>recond: ")
	h.t(s.Namespace)
	h.m("/")
	h.t(s.Instance)
	h.m("</h1>")
	if sus := s.Suspension; sus != nil {
		until := rfc(sus.Until)
		h.m("\n<p id=\"suspended\" class=\"banner\" role=\"status\"><strong>Suspended</strong> by <span id=\"suspended-by\">")
		h.t(sus.By)
		h.m(`</span>: <span id="suspend-reason">`)
		h.t(sus.Reason)
		h.m(`</span>. Ticks read, diff and report, and write, prune and heal nothing until <time id="suspended-until" datetime="`)
		h.t(until)
		h.m(`">`)
		h.t(until)
		h.m(`</time> (`)
		h.t(durSeconds(sus.RemainingSeconds))
		h.m(` left); then the loop resumes by itself. <span class="m">recond resume ends it sooner.</span></p>`)
	}
	h.m("\n<dl>")
	dd(h, "Namespace", s.Namespace)
	dd(h, "Instance", s.Instance)
	dd(h, "Repository", s.Repo)
	dd(h, "Ref", s.Ref)
	if s.Path != "" {
		dd(h, "Path", s.Path)
	}
	if c := s.Chart; c != nil {
		h.m("\n<div><dt>Chart</dt><dd id=\"chart\">")
		h.t(c.Name)
		h.m(" ")
		h.t(c.Version)
		if len(c.Values) > 0 {
			h.m(` <span class="m">values</span> `)
			h.t(strings.Join(c.Values, ", "))
		}
		h.m("</dd></div>")
	}
	h.m("\n<div><dt>Revision</dt><dd id=\"revision\">")
	writeRev(h, v.Revision)
	h.m("</dd></div>")
	dd(h, "Observe", s.Observe)
	dd(h, "Interval", durSeconds(s.IntervalSeconds))
	h.m("\n<div><dt>Health</dt><dd id=\"health\">")
	if s.Health != "" {
		writeHealth(h, s.Health)
	} else {
		h.m(`<span class="m">not assessed yet</span>`)
	}
	h.m("</dd></div>\n<div><dt>Last success</dt><dd id=\"last-success\">")
	writeTime(h, s.LastSuccess, v.now)
	h.m("</dd></div>\n<div><dt>Next tick</dt><dd id=\"next-tick\">")
	switch {
	case s.Progress.Running:
		h.m("tick ")
		h.id(s.Progress.Started)
		h.m(" running")
	case s.NextTick != nil:
		writeNext(h, *s.NextTick, v.now)
	default:
		h.m(`<span class="m">at start</span>`)
	}
	h.m("</dd></div>\n</dl>\n</header>\n<main>\n<h2 id=\"ticks\">Last ticks</h2>\n<p class=\"m\">Phases: ")
	for _, p := range reconcile.Phases {
		h.m(`<span class="k p-`)
		h.t(string(p))
		h.m(`"></span>`)
		h.t(string(p))
	}
	h.m(`<span class="k p-fail"></span>failed phase. Newest first; the bar is the tick, each phase as wide as its share of it.</p>`)
	if len(v.ticks) > 0 {
		h.m("\n<table id=\"timeline\">\n<thead><tr><th scope=\"col\">Tick</th><th scope=\"col\">Started</th>" +
			"<th scope=\"col\">Phases</th><th scope=\"col\" class=\"n\">Duration</th><th scope=\"col\">Trigger</th>" +
			"<th scope=\"col\">Outcome</th><th scope=\"col\">Revision</th><th scope=\"col\">Changes</th>" +
			"<th scope=\"col\">Failure</th><th scope=\"col\">Trace</th></tr></thead>\n<tbody>\n")
		writeTimeline(h, v.ticks, v.now)
		h.m("</tbody>\n</table>")
	} else {
		h.m("\n<p>No tick has ended yet.</p>")
	}
	o := s.Objects
	h.m("\n<h2 id=\"objects\">Managed objects</h2>\n<p class=\"m\">")
	h.n(o.Total)
	h.m(" objects, as the last health assessment saw them.</p>")
	if len(o.Items) > 0 {
		h.m("\n<table>\n<thead><tr><th scope=\"col\">Kind</th><th scope=\"col\">Name</th><th scope=\"col\">Revision</th>" +
			"<th scope=\"col\">Health</th><th scope=\"col\">Last change</th></tr></thead>\n<tbody>\n")
		if v.objects != nil {
			from := (o.Page - 1) * o.PerPage
			v.objects.rows(h, from, from+len(o.Items), v.now)
		}
		h.m("</tbody>\n</table>")
	}
	if o.Pages > 1 {
		h.m("\n<nav aria-label=\"Object pages\">")
		if o.Page > 1 {
			h.m(`<a href="?page=`)
			h.n(o.Page - 1)
			h.m(`#objects" rel="prev">Previous page</a>`)
		}
		h.m("<span>Page ")
		h.n(o.Page)
		h.m(" of ")
		h.n(o.Pages)
		h.m("</span>")
		if o.Page < o.Pages {
			h.m(`<a href="?page=`)
			h.n(o.Page + 1)
			h.m(`#objects" rel="next">Next page</a>`)
		}
		h.m("</nav>")
	}
	h.m("\n<p class=\"m\"><a href=\"api/v1/status\">This page as JSON</a></p>")
	writeTail(h)
}

// writeHealth writes a health as a coloured word.
func writeHealth(h hw, health string) {
	h.m(`<span class="h-`)
	h.t(health)
	h.m(`">`)
	h.t(health)
	h.m(`</span>`)
}

// writeOutcome writes an outcome as a badge.
func writeOutcome(h hw, outcome string) {
	h.m(`<span class="o o-`)
	h.t(outcome)
	h.m(`">`)
	h.t(outcome)
	h.m(`</span>`)
}

// writeTime writes t as a <time> element that says how long before now it
// was; "never" when t is nil.
func writeTime(h hw, t *time.Time, now time.Time) {
	if t == nil {
		h.m(`<span class="m">never</span>`)
		return
	}
	h.m(`<time datetime="`)
	h.t(rfc(*t))
	h.m(`">`)
	if d := now.Sub(*t); d > 0 {
		h.t(relative(d))
		h.m(" ago")
	} else {
		h.m("just now")
	}
	h.m(`</time>`)
}

// writeNext says about when t (the next tick) is due.
func writeNext(h hw, t, now time.Time) {
	h.m(`<time datetime="`)
	h.t(rfc(t))
	h.m(`">`)
	if d := t.Sub(now); d > time.Second {
		h.m("in about ")
		h.t(relative(d))
	} else {
		h.m("due now")
	}
	h.m(`</time>`)
}

// writeTimeline writes the rows of the timeline: each record's row,
// rendered once, with its start time relative to now.
func writeTimeline(h hw, rows []*record, now time.Time) {
	for _, r := range rows {
		h.m(r.Head)
		h.m("<td>")
		writeTime(h, &r.Detail.Start, now)
		h.m("</td>")
		h.m(r.Tail)
		h.m("\n")
	}
}

// rowHead and rowTail are a record's row of the timeline before and after
// its start time.
func rowHead(r *record) markup {
	var b strings.Builder
	h := hw{&b}
	h.m(`<tr><th scope="row"><a href="ticks/`)
	h.id(r.Detail.ID)
	h.m(`">#`)
	h.id(r.Detail.ID)
	h.m(`</a></th>`)
	return markup(b.String()) // written by an hw
}

func rowTail(r *record) markup {
	t := &r.Detail
	var b strings.Builder
	b.Grow(600)
	h := hw{&b}
	h.m("<td>")
	writeBars(h, r)
	h.m(`</td><td class="n">`)
	h.t(durSeconds(t.DurationSeconds))
	h.m("</td><td>")
	h.t(t.Trigger)
	h.m("</td><td>")
	writeOutcome(h, t.Outcome)
	if t.DryRun {
		h.m(` <span class="m">dry run</span>`)
	}
	h.m("</td><td>")
	if t.Revision != "" {
		h.m("<code>")
		h.t(short(t.Revision))
		h.m("</code>")
	}
	h.m("</td><td>")
	h.t(countsText(t.Counts))
	h.m("</td><td>")
	h.t(r.Summary)
	h.m("</td><td>")
	if t.TraceURL != "" {
		h.m(`<a href="`)
		h.u(t.TraceURL)
		h.m(`">trace<span class="sr"> #`)
		h.id(t.ID)
		h.m(`</span></a>`)
	}
	h.m("</td></tr>")
	return markup(b.String()) // written by an hw
}

// writeBars writes a record's Gantt line.
func writeBars(h hw, r *record) {
	h.m(`<div class="g" role="img" aria-label="`)
	h.t(r.Label)
	h.m(`">`)
	for _, b := range r.Bars {
		h.m(`<i class="`)
		h.t(b.Class)
		h.m(`" style="`)
		h.t(b.Style)
		h.m(`"></i>`)
	}
	h.m("</div>")
}

// objectHead is an object's row of the objects table but its last change
// (relative to the view).
func objectHead(o *Object) markup {
	var b strings.Builder
	h := hw{&b}
	h.m("<tr><td>")
	h.t(o.Kind)
	h.m(`</td><th scope="row">`)
	h.t(o.Name)
	h.m("</th><td>")
	if o.Revision != "" {
		h.m("<code>")
		h.t(short(o.Revision))
		h.m("</code>")
	}
	h.m("</td><td>")
	writeHealth(h, o.Health)
	if o.Message != "" {
		h.m(` <span class="m">`)
		h.t(o.Message)
		h.m("</span>")
	}
	h.m("</td>")
	return markup(b.String()) // written by an hw
}

// writeTick writes the page of one tick.
func writeTick(h hw, v *view) {
	t := &v.R.Detail
	writeHead(h, v)
	h.m("<header>\n<h1>Tick #")
	h.id(t.ID)
	h.m(": ")
	writeOutcome(h, t.Outcome)
	h.m("</h1>\n<dl>\n<div><dt>Instance</dt><dd>")
	h.t(v.S.Namespace)
	h.m("/")
	h.t(v.S.Instance)
	h.m("</dd></div>\n<div><dt>Started</dt><dd><time datetime=\"")
	start := rfc(t.Start)
	h.t(start)
	h.m(`">`)
	h.t(start)
	h.m("</time></dd></div>")
	dd(h, "Duration", durSeconds(t.DurationSeconds))
	dd(h, "Trigger", t.Trigger)
	h.m("\n<div><dt>Revision</dt><dd>")
	writeRev(h, v.Revision)
	h.m("</dd></div>")
	if t.DryRun {
		h.m("\n<div><dt>Dry run</dt><dd>yes</dd></div>")
	}
	if t.Health != "" {
		h.m("\n<div><dt>Health</dt><dd>")
		writeHealth(h, t.Health)
		h.m("</dd></div>")
	}
	dd(h, "Changes", countsText(t.Counts))
	if t.Heals != 0 {
		h.m("\n<div><dt>Heals</dt><dd>")
		h.n(t.Heals)
		h.m("</dd></div>")
	}
	switch {
	case t.TraceURL != "":
		h.m("\n<div><dt>Trace</dt><dd><a id=\"trace\" href=\"")
		h.u(t.TraceURL)
		h.m(`">trace `)
		h.t(t.TraceID)
		h.m("</a></dd></div>")
	case t.TraceID != "":
		h.m("\n<div><dt>Trace</dt><dd><code>")
		h.t(t.TraceID)
		h.m("</code></dd></div>")
	}
	h.m("\n</dl>\n<p><a href=\"../\">All ticks</a></p>\n</header>\n<main>\n<h2>Phases</h2>\n")
	writeBars(h, v.R)
	h.m("\n<table>\n<thead><tr><th scope=\"col\">Phase</th><th scope=\"col\" class=\"n\">Duration</th>" +
		"<th scope=\"col\" class=\"n\">Share of the tick</th><th scope=\"col\">Result</th></tr></thead>\n<tbody>")
	for _, p := range t.Phases {
		h.m("\n<tr><th scope=\"row\">")
		h.t(p.Phase)
		h.m(`</th><td class="n">`)
		h.t(durSeconds(p.DurationSeconds))
		h.m(`</td><td class="n">`)
		h.t(fmt.Sprintf("%.1f%%", share(p.DurationSeconds, t.DurationSeconds)))
		h.m("</td><td>")
		if p.Failed {
			h.m("failed (")
			h.t(p.Reason)
			h.m(")")
			if p.Aside {
				h.m(", not the tick's failure")
			}
		} else {
			h.m("ok")
		}
		h.m("</td></tr>")
	}
	h.m("\n</tbody>\n</table>")
	if f := t.Failure; f != nil {
		h.m("\n<h2 id=\"error\">Error</h2>\n<pre>")
		h.t(f.Message)
		h.m("</pre>")
	}
	h.m("\n<h2 id=\"changes\">Changes</h2>")
	if len(t.Changes) > 0 {
		for _, c := range t.Changes {
			writeChange(h, &c)
		}
		if t.MoreChanges != 0 {
			h.m("\n<p class=\"m\">and ")
			h.n(t.MoreChanges)
			h.m(" more objects</p>")
		}
	} else {
		h.m("\n<p>No difference from Git.</p>")
	}
	h.m("\n<h2 id=\"operations\">Operations</h2>")
	if len(t.Operations) > 0 {
		h.m("\n")
		writeOps(h, t.Operations)
		if t.MoreOperations != 0 {
			h.m("\n<p class=\"m\">and ")
			h.n(t.MoreOperations)
			h.m(" more operations</p>")
		}
	} else {
		h.m("\n<p>No write.</p>")
	}
	if len(t.Rejected) > 0 {
		h.m("\n<h2 id=\"rejected\">Refused by the validating dry run</h2>\n")
		writeOps(h, t.Rejected)
	}
	if len(t.Terminating)+len(t.Equivalent)+len(t.BackingOff)+len(t.Skipped)+len(t.Orphaned) > 0 {
		h.m("\n<h2>Objects left alone</h2>\n<ul>")
		for _, l := range []struct {
			names []string
			why   markup
		}{
			{t.Terminating, ": terminating"},
			{t.Equivalent, ": the server showed applying it changes nothing"},
			{t.BackingOff, ": self-heal backing off (another manager keeps changing it)"},
			{t.Skipped, ": skipped by its opt-out annotation"},
			{t.Orphaned, ": orphaned, not deleted (recond.dev/prune: disabled)"},
		} {
			for _, name := range l.names {
				h.m("\n<li>")
				h.t(name)
				h.m(l.why)
				h.m("</li>")
			}
		}
		h.m("\n</ul>")
	}
	writeTail(h)
}

// writeChange writes one change the diff phase found, with its fields.
func writeChange(h hw, c *Change) {
	h.m("\n<h3>")
	h.t(c.Action)
	h.m(" ")
	h.t(c.Kind)
	h.m("/")
	h.t(c.Name)
	if c.Uncertain {
		h.m(` <span class="m">(confirmed by the server)</span>`)
	}
	h.m("</h3>")
	if len(c.Fields) > 0 {
		h.m("\n<table>\n<thead><tr><th scope=\"col\">Field</th><th scope=\"col\">Live</th>" +
			"<th scope=\"col\">Desired</th></tr></thead>\n<tbody>")
		for _, f := range c.Fields {
			h.m("\n<tr><th scope=\"row\"><code>")
			h.t(f.Path)
			h.m("</code></th><td><code>")
			writeValue(h, f.Live)
			h.m("</code></td><td><code>")
			writeValue(h, f.Desired)
			h.m("</code></td></tr>")
		}
		h.m("\n</tbody>\n</table>")
	}
	if c.MoreFields != 0 {
		h.m("\n<p class=\"m\">and ")
		h.n(c.MoreFields)
		h.m(" more fields</p>")
	}
}

// writeValue writes a field's value, or says it is absent.
func writeValue(h hw, v string) {
	if v == "" {
		h.m(`<span class="m">(absent)</span>`)
		return
	}
	h.t(v)
}

// writeOps writes a table of writes.
func writeOps(h hw, ops []Operation) {
	h.m("<table>\n<thead><tr><th scope=\"col\">Action</th><th scope=\"col\">Object</th>" +
		"<th scope=\"col\" class=\"n\">Duration</th><th scope=\"col\">Fields</th><th scope=\"col\">Error</th></tr></thead>\n<tbody>")
	for _, o := range ops {
		h.m("\n<tr><td>")
		h.t(o.Action)
		h.m(`</td><th scope="row">`)
		h.t(o.Kind)
		h.m("/")
		h.t(o.Name)
		h.m(`</th><td class="n">`)
		h.t(durSeconds(o.DurationSeconds))
		h.m("</td><td>")
		for i, f := range o.Fields {
			if i > 0 {
				h.m(", ")
			}
			h.m("<code>")
			h.t(f)
			h.m("</code>")
		}
		h.m("</td><td>")
		if o.Error != "" {
			h.m("<pre>")
			h.t(o.Error)
			h.m("</pre>")
		} else {
			h.m("ok")
		}
		h.m("</td></tr>")
	}
	h.m("\n</tbody>\n</table>")
}

// writeMissing writes the page of a tick that is not available.
func writeMissing(h hw, v *view) {
	writeHead(h, v)
	h.m("<header>\n<h1>Tick #")
	h.id(v.ID)
	h.m("</h1>\n</header>\n<main>\n<h2>Not available</h2>\n<p>")
	h.t(v.Message)
	h.m("</p>\n<p><a href=\"../\">All ticks</a></p>")
	writeTail(h)
}
