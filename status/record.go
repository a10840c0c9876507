package status

import (
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"

	"recond.dev/recond/reconcile"
)

// Bounds of what one tick record keeps, so that a tick that changed
// everything costs the ring a bounded amount of memory.
const (
	// MaxChanges is the number of changes (and of operations) a tick
	// keeps; the rest are counted.
	MaxChanges = 500
	// MaxFields is the number of changed fields a tick keeps over all its
	// changes.
	MaxFields = 1000
	// MaxValue is the length in bytes a field value is cut at.
	MaxValue = 200
	// maxNames bounds the lists of names (terminating, equivalent, backing
	// off) and maxMessage a health message.
	maxNames   = 100
	maxMessage = 300
	// maxSummary is how much of a failure the timeline shows (the tick's
	// page shows it in full).
	maxSummary = 120
)

// record is one tick as the ring keeps it: built once at TickEnd from the
// Result, never changed after, so that views read it without a lock. It
// keeps no reference to the Result or its objects.
type record struct {
	Detail TickDetail
	// Bars and Label are the timeline's Gantt line, computed once.
	Bars  []bar
	Label string
	// Summary is the failure cut for the timeline.
	Summary string
	// Head and Tail are the record's row of the timeline but its start
	// time (relative to the view), written once.
	Head, Tail markup
}

// bar is one phase in a Gantt line.
type bar struct {
	Phase string
	Class string
	Style string // width:N%
}

// newRecord compacts r. traceID is "" when the tick was not sampled.
func newRecord(r *reconcile.Result, traceID, traceURL string) *record {
	t := Tick{
		ID:              r.ID,
		Start:           r.Start.UTC(),
		End:             r.Start.Add(r.Duration).UTC(),
		DurationSeconds: r.Duration.Seconds(),
		Trigger:         string(r.Trigger),
		Outcome:         string(r.Outcome),
		Revision:        r.Revision,
		DryRun:          r.DryRun,
		Counts: Counts{
			Desired: r.Counts.Desired, Drifted: r.Counts.Drifted, Created: r.Counts.Created,
			Updated: r.Counts.Updated, Pruned: r.Counts.Pruned, Managed: r.Counts.Managed,
			Terminating: r.Counts.Terminating, Equivalent: r.Counts.Equivalent,
			Refused: r.Counts.Refused, NotWritten: r.Counts.NotWritten,
		},
		Heals:   len(r.Heals),
		TraceID: traceID,
	}
	if traceID != "" && traceURL != "" {
		t.TraceURL = strings.ReplaceAll(traceURL, "{trace_id}", traceID)
	}
	if r.Health != nil {
		t.Health = string(r.Health.Status)
	}
	for _, p := range r.Phases {
		pr := PhaseRun{Phase: string(p.Phase), DurationSeconds: p.Duration.Seconds(), Aside: p.Aside}
		if p.Err != nil {
			pr.Failed, pr.Reason = true, string(p.Err.Reason)
		}
		t.Phases = append(t.Phases, pr)
	}
	rec := &record{}
	if f := r.Failure(); f != nil {
		// FailureText, never f.Error(): the API server's error may quote a
		// Secret the tick wrote.
		t.Failure = &Failure{Phase: string(f.Phase), Reason: string(f.Reason), Message: r.FailureText()}
		rec.Summary = cut(t.Failure.Message, maxSummary)
	}
	d := TickDetail{Tick: t}
	budget := MaxFields
	for i, c := range r.Changes {
		if i == MaxChanges {
			d.MoreChanges = len(r.Changes) - MaxChanges
			break
		}
		ch := Change{Kind: c.Kind, Name: c.Name, Action: string(c.Action), Uncertain: c.Uncertain}
		for j, f := range c.Fields {
			if budget == 0 {
				ch.MoreFields = len(c.Fields) - j
				break
			}
			budget--
			ch.Fields = append(ch.Fields, Field{Path: f.Path,
				Live: value(c.Kind, f.Path, f.Live), Desired: value(c.Kind, f.Path, f.Desired)})
		}
		d.Changes = append(d.Changes, ch)
	}
	for i, op := range r.Ops {
		if i == MaxChanges {
			d.MoreOperations = len(r.Ops) - MaxChanges
			break
		}
		d.Operations = append(d.Operations, operation(op))
	}
	for i, op := range r.Rejected {
		if i == MaxChanges {
			break
		}
		d.Rejected = append(d.Rejected, operation(op))
	}
	d.Terminating = names(r.Terminating)
	d.Equivalent = names(r.Equivalent)
	d.BackingOff = names(r.BackingOff)
	for i, sk := range r.Skipped {
		if i == MaxChanges {
			break
		}
		d.Skipped = append(d.Skipped, sk.String())
	}
	for _, o := range r.Orphaned {
		d.Orphaned = append(d.Orphaned, o.String())
	}
	rec.Detail = d
	rec.Bars, rec.Label = gantt(r)
	rec.Head, rec.Tail = rowHead(rec), rowTail(rec)
	return rec
}

func operation(op reconcile.Operation) Operation {
	o := Operation{Kind: op.Kind, Name: op.Name, Action: string(op.Action),
		DurationSeconds: op.Duration.Seconds(), Error: op.ErrorText()}
	if len(op.Fields) > 0 {
		o.Fields = append([]string(nil), op.Fields[:min(len(op.Fields), 50)]...)
	}
	return o
}

func names(in []string) []string {
	if len(in) == 0 {
		return nil
	}
	return append([]string(nil), in[:min(len(in), maxNames)]...)
}

// gantt lays out the phases side by side, each as wide as its share of the
// tick (the tick's duration, or the phases' sum when that is longer).
func gantt(r *reconcile.Result) ([]bar, string) {
	var sum time.Duration
	for _, p := range r.Phases {
		sum += p.Duration
	}
	total := max(r.Duration, sum)
	bars := make([]bar, 0, len(r.Phases))
	labels := make([]string, 0, len(r.Phases))
	for _, p := range r.Phases {
		pct := 0.0
		if total > 0 {
			pct = float64(p.Duration) * 100 / float64(total)
		}
		title := string(p.Phase) + " " + formatDuration(p.Duration)
		class := "p-" + string(p.Phase)
		if p.Err != nil {
			title += " failed (" + string(p.Err.Reason) + ")"
			class += " p-fail"
		}
		bars = append(bars, bar{Phase: string(p.Phase), Class: class,
			Style: fmt.Sprintf("width:%.1f%%", pct)})
		labels = append(labels, title)
	}
	if len(labels) == 0 {
		return nil, "no phase ran"
	}
	return bars, strings.Join(labels, ", ")
}

// secretMask is how the diff writes a Secret's value.
var secretMask = regexp.MustCompile(`^<secret sha256:[0-9a-f]+>$`)

// hidden stands for a Secret value that reached the page unmasked.
const hidden = "<hidden>"

// value renders a field value as JSON text, cut at MaxValue; the page
// escapes it (as HTML text only), so < and & stay as they are. In a Secret,
// a value under data or stringData that is not the diff's mask is hidden:
// the diff masks them, and the page does not rely on it alone.
func value(kind, path string, v any) string {
	if v == nil {
		return ""
	}
	if kind == "Secret" && secretData(path) {
		v = masked(v)
	}
	if s, ok := v.(string); ok && (s == hidden || secretMask.MatchString(s)) {
		return s
	}
	return cut(jsonText(v), MaxValue)
}

// secretData tells whether path is under a Secret's data or stringData.
func secretData(path string) bool {
	for _, p := range []string{"data", "stringData"} {
		if rest, ok := strings.CutPrefix(path, p); ok && (rest == "" || rest[0] == '.' || rest[0] == '[') {
			return true
		}
	}
	return false
}

// masked keeps the diff's masks and hides any other value (a map keeps its
// keys).
func masked(v any) any {
	switch v := v.(type) {
	case string:
		if secretMask.MatchString(v) {
			return v
		}
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = masked(e)
		}
		return out
	}
	return hidden
}

// cut shortens s to at most n bytes on a rune boundary, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// traceIDOf is the tick's trace id when its root span is sampled.
func traceIDOf(sc trace.SpanContext) string {
	if !sc.IsValid() || !sc.IsSampled() {
		return ""
	}
	return sc.TraceID().String()
}

// objectsOf compacts the objects of a health assessment.
func objectsOf(h *reconcile.Health) []Object {
	out := make([]Object, 0, len(h.Objects))
	for _, o := range h.Objects {
		obj := Object{APIVersion: o.Ref.APIVersion, Kind: o.Ref.Kind, Name: o.Ref.Name,
			Revision: o.Revision, Health: string(o.Status), Message: cut(o.Message, maxMessage)}
		if !o.Since.IsZero() {
			s := o.Since.UTC()
			obj.Since = &s
		}
		if !o.Changed.IsZero() {
			c := o.Changed.UTC()
			obj.Changed = &c
		}
		out = append(out, obj)
	}
	return out
}
