package status

import (
	"fmt"
	"strings"
	"time"

	"recond.dev/recond/internal/revision"
)

// rfc is t in UTC, as RFC 3339.
func rfc(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// durSeconds is a duration in seconds written as formatDuration does.
func durSeconds(s float64) string { return formatDuration(time.Duration(s * float64(time.Second))) }

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
