package redact

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Word reports whether r belongs to a word: a letter, a digit or a mark of
// any script, or '_'. It is the one word rule: a value shorter than
// MinLength is found where the characters on both sides of it are not
// Word characters ('-', '.', '/', a blank, a quote, the text's ends).
func Word(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r)
}

// Redact returns text with every form of every value of s replaced by
// Mask.
func (s *Set) Redact(text string) string {
	return s.Replace(text, func(string) string { return Mask })
}

// Replace returns text with every form of every value of s replaced by
// what mask makes of it (a difference's path shows a salted hash in its
// place, so that two masked keys stay apart).
func (s *Set) Replace(text string, mask func(form string) string) string {
	if s == nil || text == "" {
		return text
	}
	for _, t := range s.targets {
		if strings.Contains(text, t.text) {
			text = strings.ReplaceAll(text, t.text, mask(t.text))
		}
	}
	for _, v := range s.short {
		if strings.Contains(text, v) {
			text = replaceWords(text, v, mask)
		}
	}
	return text
}

// replaceWords replaces v in text where it stands as a word of its own.
func replaceWords(text, v string, mask func(string) string) string {
	var b strings.Builder
	for {
		i := indexWord(text, v)
		if i < 0 {
			b.WriteString(text)
			return b.String()
		}
		b.WriteString(text[:i])
		b.WriteString(mask(v))
		text = text[i+len(v):]
	}
}

// indexWord is the index of the first v in text that stands as a word of
// its own, or -1.
func indexWord(text, v string) int {
	off := 0
	for {
		i := strings.Index(text[off:], v)
		if i < 0 {
			return -1
		}
		i += off
		before, _ := utf8.DecodeLastRuneInString(text[:i])
		after, _ := utf8.DecodeRuneInString(text[i+len(v):])
		if (i == 0 || !Word(before)) && (i+len(v) == len(text) || !Word(after)) {
			return i
		}
		_, size := utf8.DecodeRuneInString(text[i:])
		off = i + size
	}
}

// Contains reports whether text holds a value of s, in any of its forms
// (a line of a multi-line value only when it is key material).
func (s *Set) Contains(text string) bool {
	if s == nil || text == "" {
		return false
	}
	for _, t := range s.targets {
		if !t.lineOnly && strings.Contains(text, t.text) {
			return true
		}
	}
	for _, v := range s.short {
		if indexWord(text, v) >= 0 {
			return true
		}
	}
	if len(s.multi) > 0 && strings.Contains(text, "\n") {
		u := unindent(text)
		for _, m := range s.multi {
			if strings.Contains(u, m) {
				return true
			}
		}
	}
	return false
}

// In reports whether v, a decoded JSON value (a map, a list or a scalar),
// holds a value of s anywhere: in a string, a number or a map key.
func (s *Set) In(v any) bool {
	if s == nil {
		return false
	}
	switch x := v.(type) {
	case nil, bool:
		return false
	case map[string]any:
		for k, c := range x {
			if s.Contains(k) || s.In(c) {
				return true
			}
		}
		return false
	case []any:
		for _, c := range x {
			if s.In(c) {
				return true
			}
		}
		return false
	case string:
		return s.Contains(x)
	case int64:
		return s.Contains(strconv.FormatInt(x, 10))
	case int:
		return s.Contains(strconv.Itoa(x))
	case float64:
		return s.Contains(strconv.FormatFloat(x, 'f', -1, 64)) || s.Contains(strconv.FormatFloat(x, 'g', -1, 64))
	case json.Number:
		return s.Contains(string(x))
	}
	return s.Contains(fmt.Sprint(v))
}

// Error returns err with every value of s removed from its text. errors.Is
// and errors.As still reach the causes (a cancellation, a classified
// failure), whose own texts must not be shown; err itself when its text
// holds none.
func (s *Set) Error(err error) error {
	if s == nil || err == nil {
		return err
	}
	msg := err.Error()
	if out := s.Redact(msg); out != msg {
		return &Redacted{Text: out, Err: err}
	}
	return err
}

// Redacted is an error whose text had secret values removed: Error shows
// Text, Unwrap returns the original (for errors.Is and errors.As) whose
// own text must not be shown.
type Redacted struct {
	Text string
	Err  error
}

func (e *Redacted) Error() string { return e.Text }

// Unwrap returns the original error.
func (e *Redacted) Unwrap() error { return e.Err }
