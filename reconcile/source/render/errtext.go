package render

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// MaxErrorText bounds the text of a render's error: what one log line, an
// Event and the status page hold. A template that includes itself through
// tpl fails after Helm's thousand nested calls with an error that quotes
// each of them (hundreds of kilobytes).
const MaxErrorText = 4 << 10

// BoundError is err with a text of at most about MaxErrorText bytes:
// a chain of nested template calls that repeats is said once with how
// many times it repeats (the innermost cause kept), and what is still too
// long loses its middle. The error's type and causes are kept (errors.As
// finds a *ManifestError at its top, as before).
func BoundError(err error) error {
	if err == nil || len(err.Error()) <= MaxErrorText {
		return err
	}
	if me, ok := err.(*ManifestError); ok {
		return &ManifestError{File: me.File, Object: me.Object, Err: &shortenedError{msg: boundText(me.Err.Error()), err: me.Err}}
	}
	return &shortenedError{msg: boundText(err.Error()), err: err}
}

// shortenedError is an error shown with a shorter text, its causes kept
// for errors.Is and errors.As.
type shortenedError struct {
	msg string
	err error
}

func (e *shortenedError) Error() string { return e.msg }
func (e *shortenedError) Unwrap() error { return e.err }

// boundText is s with its repeated template call chains collapsed, then
// cut in the middle to MaxErrorText bytes.
func boundText(s string) string {
	s = collapseCalls(s)
	if len(s) <= MaxErrorText {
		return s
	}
	head, tail := s[:MaxErrorText/2], s[len(s)-MaxErrorText/2:]
	for !utf8.ValidString(head) {
		head = head[:len(head)-1]
	}
	for !utf8.ValidString(tail) {
		tail = tail[1:]
	}
	return fmt.Sprintf("%s … (%d bytes cut) … %s", head, len(s)-len(head)-len(tail), tail)
}

// callSep ends each level of a Go template error raised inside a function
// call (include, tpl): "…: error calling include: template: …".
const callSep = "error calling "

// collapseCalls says once a run of template call levels that repeats
// (a cycle of one to eight levels, three times or more).
func collapseCalls(s string) string {
	parts := strings.SplitAfter(s, callSep)
	if len(parts) < 4 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(parts); {
		period, reps := 0, 0
		for p := 1; p <= 8 && i+3*p <= len(parts); p++ {
			r := 1
			for i+(r+1)*p <= len(parts) && slices.Equal(parts[i+r*p:i+(r+1)*p], parts[i:i+p]) {
				r++
			}
			if r >= 3 && r*p > reps*period {
				period, reps = p, r
			}
		}
		if period == 0 {
			b.WriteString(parts[i])
			i++
			continue
		}
		for _, part := range parts[i : i+period] {
			b.WriteString(part)
		}
		fmt.Fprintf(&b, "[… the %d call(s) above, %d times more …] ", period, reps-1)
		i += reps * period
	}
	return b.String()
}
