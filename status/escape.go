package status

import (
	"html"
	"strconv"
	"strings"
)

// markup is HTML the page itself wrote: a constant of its writers, or a
// fragment an hw built (a timeline row, an object row, the style sheet).
// A string constant converts to markup by itself and a string value only
// when converted by name, so that a value never reaches the page unescaped
// by mistake: every conversion of a value to markup is a fragment whose
// values an hw escaped.
type markup string

// writer is where an hw writes: a bytes.Buffer (a page) or a
// strings.Builder (a fragment).
type writer interface {
	WriteString(s string) (int, error)
	WriteByte(c byte) error
}

// hw writes HTML. Markup goes through m; a value goes through t (text, or
// a double-quoted attribute value: the same escapes serve both), u (a URL
// in an href) or a number's writer; there is no other way.
type hw struct{ w writer }

// m writes markup as it is.
func (h hw) m(s markup) { _, _ = h.w.WriteString(string(s)) }

// t writes a value as text or as a double-quoted attribute value.
func (h hw) t(s string) { _, _ = h.w.WriteString(escape(s)) }

// n writes an integer.
func (h hw) n(i int) { _, _ = h.w.WriteString(strconv.Itoa(i)) }

// id writes a tick id.
func (h hw) id(i uint64) { _, _ = h.w.WriteString(strconv.FormatUint(i, 10)) }

// u writes a URL as the value of a double-quoted href: one with a scheme
// other than http, https or mailto (javascript:, data:) becomes
// "#ZgotmplZ", which goes nowhere, as html/template wrote it; the rest is
// normalized (normalizeURL) and escaped as an attribute value.
func (h hw) u(s string) {
	if !safeURL(s) {
		h.m("#ZgotmplZ")
		return
	}
	h.t(normalizeURL(s))
}

// escape is s as HTML text or as a quoted attribute value: html.EscapeString
// escapes &, <, >, " and ', and a NUL becomes U+FFFD as an HTML parser reads
// it in an attribute.
func escape(s string) string {
	s = html.EscapeString(s)
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	}
	return s
}

// safeURL reports whether s is a relative URL or one whose scheme is http,
// https or mailto. A scheme is what comes before the first ':' when no '/'
// does.
func safeURL(s string) bool {
	scheme, _, ok := strings.Cut(s, ":")
	if !ok || strings.Contains(scheme, "/") {
		return true
	}
	return strings.EqualFold(scheme, "http") || strings.EqualFold(scheme, "https") || strings.EqualFold(scheme, "mailto")
}

// normalizeURL percent-encodes every byte of s that is neither unreserved
// nor reserved in a URL (RFC 3986), as html/template's URL normalizer did:
// a space, a quote, '<', '>', '(', ')', a non-ASCII byte, and a '%' that
// starts no escape. What is left can only end the attribute or start a tag
// through '&', which escape escapes. The commit URL's revision is already
// path-escaped (Page.commitURL), and a trace id is hex.
func normalizeURL(s string) string {
	const hex = "0123456789abcdef"
	var b strings.Builder
	written := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
			continue
		case strings.IndexByte("-._~!#$&*+,/:;=?@[]", c) >= 0:
			continue
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			continue
		}
		if written == 0 {
			b.Grow(len(s) + 16)
		}
		b.WriteString(s[written:i])
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&0xf])
		written = i + 1
	}
	if written == 0 {
		return s
	}
	b.WriteString(s[written:])
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
