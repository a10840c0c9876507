package suspend

import (
	"testing"
	"time"

	"recond.dev/recond/reconcile/keys"
)

// TestReadSuspension: what the annotations say, at a given time, with a
// maximum of 24h.
func TestReadSuspension(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	max := 24 * time.Hour
	cm := func(ann map[string]string) map[string]string {
		if ann == nil {
			return map[string]string{} // an inventory without annotations
		}
		return ann
	}
	for _, tc := range []struct {
		name   string
		cm     map[string]string
		until  time.Time // zero: not active
		stale  bool
		reason string
	}{
		{"no inventory", nil, time.Time{}, false, ""},
		{"no annotations", cm(nil), time.Time{}, false, ""},
		{"in force", cm(map[string]string{keys.AnnotationSuspendedUntil: "2026-12-02T12:00:00Z", keys.AnnotationSuspendReason: "r", keys.AnnotationSuspendedBy: "a"}),
			now.Add(2 * time.Hour), false, "r"},
		{"ended: the annotations go", cm(map[string]string{keys.AnnotationSuspendedUntil: "2026-12-02T09:59:59Z", keys.AnnotationSuspendReason: "r"}),
			time.Time{}, true, ""},
		{"ends now", cm(map[string]string{keys.AnnotationSuspendedUntil: "2026-12-02T10:00:00Z"}), time.Time{}, true, ""},
		{"no end: the maximum, written", cm(map[string]string{keys.AnnotationSuspendReason: "r"}), now.Add(max), true, "r"},
		{"unreadable end: the maximum, written", cm(map[string]string{keys.AnnotationSuspendedUntil: "tomorrow", keys.AnnotationSuspendReason: "r"}), now.Add(max), true, "r"},
		{"end too far: the maximum, written", cm(map[string]string{keys.AnnotationSuspendedUntil: "2027-01-01T00:00:00Z"}), now.Add(max), true, "(no reason given)"},
		{"an empty until alone suspends", cm(map[string]string{keys.AnnotationSuspendedUntil: ""}), now.Add(max), true, "(no reason given)"},
		{"an end in another zone", cm(map[string]string{keys.AnnotationSuspendedUntil: "2026-12-02T17:30:00+05:30", keys.AnnotationSuspendReason: "r"}), now.Add(2 * time.Hour), false, "r"},
		{"control characters shown as spaces", cm(map[string]string{keys.AnnotationSuspendedUntil: "2026-12-02T12:00:00Z", keys.AnnotationSuspendReason: "a\x1b[2Jb\nc"}), now.Add(2 * time.Hour), false, "a [2Jb c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m Memo
			got := m.Read(tc.cm, "", now, max)
			if tc.until.IsZero() != (got.Active == nil) || got.Active != nil && (!got.Active.Until.Equal(tc.until) || got.Active.Reason != tc.reason) {
				t.Errorf("active = %v, want until %v reason %q", got.Active, tc.until, tc.reason)
			}
			if got.Active != nil && got.Active.Until.Location() != time.UTC {
				t.Errorf("until in %v, want UTC (so that two readings compare equal)", got.Active.Until.Location())
			}
			if got.Stale != tc.stale {
				t.Errorf("stale = %t, want %t (%s)", got.Stale, tc.stale, got.Note)
			}
			// The end of a suspension without one does not move from tick
			// to tick.
			if again := m.Read(tc.cm, "", now.Add(time.Minute), max); got.Active != nil && (again.Active == nil || !again.Active.Until.Equal(got.Active.Until)) {
				t.Errorf("a minute later: %v, want the same end %v", again.Active, got.Active.Until)
			}
		})
	}
}
