package suspend

import (
	"fmt"
	"strings"
	"time"

	"recond.dev/recond/reconcile/keys"
)

// annotations are the annotations of a suspension.
var annotations = []string{keys.AnnotationSuspendedUntil, keys.AnnotationSuspendReason, keys.AnnotationSuspendedBy}

// DefaultMax is how long a suspension lasts at most (--suspend-max): a
// loop is never stopped by oversight for longer.
const DefaultMax = 24 * time.Hour

// FieldManager is the field manager of the suspension's annotations: not
// recond's own, so that recond's apply of the inventory never removes them.
const FieldManager = "recond-suspend"

// MaxText bounds the reason and the author (an annotation is meant to be
// read on one screen).
const MaxText = 1024

// Suspension is an operator's stop of the loop's writes: while it lasts,
// every tick still reads, observes, diffs and assesses health, and writes,
// prunes and heals nothing.
type Suspension struct {
	// Until is when the suspension ends by itself.
	Until time.Time `json:"until"`
	// Reason and By are the operator's words: why, and who.
	Reason string `json:"reason"`
	By     string `json:"by"`
}

// Active reports whether the suspension is in force at now.
func (s *Suspension) Active(now time.Time) bool { return s != nil && now.Before(s.Until) }

func (s *Suspension) String() string {
	if s == nil {
		return "not suspended"
	}
	return fmt.Sprintf("suspended until %s by %s: %s", s.Until.UTC().Format(time.RFC3339), s.By, s.Reason)
}

// Annotations are the annotations that write s on the inventory.
func (s *Suspension) Annotations() map[string]string {
	return map[string]string{
		keys.AnnotationSuspendedUntil: s.Until.UTC().Format(time.RFC3339),
		keys.AnnotationSuspendReason:  s.Reason,
		keys.AnnotationSuspendedBy:    s.By,
	}
}

// Removal is the merge patch of annotations that ends a suspension.
func Removal() map[string]any {
	ann := map[string]any{}
	for _, a := range annotations {
		ann[a] = nil
	}
	return ann
}

// Present reports whether ann holds any annotation of a suspension.
func Present(ann map[string]string) bool {
	for _, a := range annotations {
		if _, ok := ann[a]; ok {
			return true
		}
	}
	return false
}

// Printable is an operator's text as recond shows it: no control
// characters (a newline or a terminal escape in an Event note, a log or a
// terminal), at most MaxText bytes, trimmed.
func Printable(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
	s = strings.TrimSpace(s)
	if len(s) > MaxText {
		s = strings.ToValidUTF8(s[:MaxText], "") + "…"
	}
	return s
}
