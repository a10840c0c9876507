package suspend

import (
	"fmt"
	"strings"
	"time"

	"recond.dev/recond/reconcile/keys"
)

// State is what a reading of the inventory's annotations says of the
// suspension.
type State struct {
	// Active is the suspension in force (nil: none).
	Active *Suspension
	// Stale is set when the annotations need writing: a suspension that
	// ended (removed), or one whose end was missing, unreadable or too far
	// (written as Active.Until).
	Stale bool
	// Note says what was wrong with them, for the log.
	Note string
	// RV is the inventory's resourceVersion they were read at: what
	// settling them is conditional on.
	RV string
}

// Patch is the merge patch of annotations that settles what s found
// stale: an ended suspension's annotations removed, a missing or
// unreadable end written.
func (s State) Patch() map[string]any {
	if s.Active == nil {
		return Removal()
	}
	return map[string]any{keys.AnnotationSuspendedUntil: s.Active.Until.UTC().Format(time.RFC3339)}
}

// maxClockSkew is how far past --suspend-max from now an end may be and
// still be taken as written: the process that wrote it may run a little
// ahead.
const maxClockSkew = time.Minute

// Memo remembers when a suspension without a readable end was first seen,
// so that its end does not move from reading to reading until it is
// written. The zero Memo is ready; it is not safe for concurrent use.
type Memo struct {
	first map[string]time.Time // by the annotations' values
}

// Read reads the suspension from an inventory's annotations ann (nil: no
// inventory, no suspension), read at resourceVersion rv, at now, with max
// the longest a suspension may last.
func (m *Memo) Read(ann map[string]string, rv string, now time.Time, max time.Duration) State {
	until, hasUntil := ann[keys.AnnotationSuspendedUntil]
	reason, hasReason := ann[keys.AnnotationSuspendReason]
	by, hasBy := ann[keys.AnnotationSuspendedBy]
	if !hasUntil && !hasReason && !hasBy {
		m.first = nil // no suspension: nothing to remember
		return State{}
	}
	s := &Suspension{Reason: Printable(reason), By: Printable(by)}
	if s.Reason == "" {
		s.Reason = "(no reason given)"
	}
	if s.By == "" {
		s.By = "(unknown)"
	}
	// RFC 3339 allows a lower-case t and z; Go's layout does not.
	t, err := time.Parse(time.RFC3339, strings.ToUpper(strings.TrimSpace(until)))
	t = t.UTC() // one zone, so that two readings of one end are equal
	switch {
	case err == nil && !now.Before(t):
		// Ended: the annotations go.
		return State{Stale: true, RV: rv}
	case err == nil && t.Sub(now) <= max+maxClockSkew:
		s.Until = t
		return State{Active: s, RV: rv}
	}
	// No readable end, or one too far: max from when this process first
	// saw it, written back so that every process agrees.
	key := until + "\x00" + reason + "\x00" + by
	if m.first == nil {
		m.first = map[string]time.Time{}
	}
	first, ok := m.first[key]
	if !ok {
		first = now
		m.first[key] = now
	}
	s.Until = first.Add(max).UTC().Truncate(time.Second)
	note := fmt.Sprintf("%s %q is not an RFC 3339 time", keys.AnnotationSuspendedUntil, until)
	switch {
	case !hasUntil:
		note = keys.AnnotationSuspendedUntil + " is missing"
	case err == nil:
		note = fmt.Sprintf("%s %s is further than --suspend-max (%s) away", keys.AnnotationSuspendedUntil, until, max)
	}
	if !now.Before(s.Until) {
		return State{Stale: true, Note: note, RV: rv}
	}
	return State{Active: s, Stale: true, Note: note + "; the suspension lasts --suspend-max", RV: rv}
}
