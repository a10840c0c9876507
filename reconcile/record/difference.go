package record

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"recond.dev/recond/reconcile/diff"
)

// The caps of one difference line: a change of 10,000 labels is one line
// of at most MaxDifferenceFields fields and about MaxDifferenceBytes of
// text, each value and path cut at MaxDifferenceValue bytes (as the status
// page cuts values); more_fields counts the fields left out. recond diff
// shows every field; the status page up to 1,000 a tick.
const (
	MaxDifferenceFields = 20
	MaxDifferenceBytes  = 4096
	MaxDifferenceValue  = 200
)

// DifferenceText is a change as Change.String writes it, on one line
// ("; " between fields), within the caps above, and how many fields it
// left out.
func DifferenceText(c diff.Change) (string, int) {
	id := c.Kind + "/" + c.Name
	if c.Action != diff.Update || len(c.Fields) == 0 {
		return id + ": " + string(c.Action), 0
	}
	var b strings.Builder
	if c.Uncertain {
		b.WriteString(id + ": update (uncertain)")
	}
	for i, f := range c.Fields {
		if i == MaxDifferenceFields || b.Len() >= MaxDifferenceBytes {
			return b.String(), len(c.Fields) - i
		}
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		b.WriteString(id + " " + cutText(f.Path, MaxDifferenceValue) + ": " +
			cutText(diffValue(f.Live), MaxDifferenceValue) + " -> " + cutText(diffValue(f.Desired), MaxDifferenceValue))
	}
	return b.String(), 0
}

// diffValue writes a field's value as Change.String does: JSON, "<none>"
// when absent, < and > kept (a Secret's mask reads <secret sha256:...>).
func diffValue(v any) string {
	if v == nil {
		return "<none>"
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// cutText cuts s to at most n bytes on a rune boundary, ending with "…"
// when it cut.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}
