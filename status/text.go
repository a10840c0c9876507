package status

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// jsonText writes v as JSON text to be read by people: strings keep <, >
// and & as they are (encoding/json would write \u003c, \u0026), because
// the page escapes what it shows once, as HTML text, and the JSON API
// escapes its own output.
func jsonText(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

// isBidi reports whether r is a bidirectional formatting character: one
// that reorders the text around it when displayed (U+202E shows what
// follows right to left), so that a value can read as something it is not.
func isBidi(r rune) bool {
	switch {
	case r == 0x061C, r == 0x200E, r == 0x200F: // ALM, LRM, RLM
		return true
	case r >= 0x202A && r <= 0x202E: // LRE, RLE, PDF, LRO, RLO
		return true
	case r >= 0x2066 && r <= 0x2069: // LRI, RLI, FSI, PDI
		return true
	}
	return false
}

// visibleBidi returns page, an HTML page, with every bidirectional
// formatting character replaced by its code point in view ("<U+202E>",
// escaped). The page's own markup holds none: any there comes from a value.
// page is returned as it is when it has none.
func visibleBidi(page []byte) []byte {
	if !hasBidi(page) {
		return page
	}
	out := make([]byte, 0, len(page)+64)
	for i := 0; i < len(page); {
		r, n := utf8.DecodeRune(page[i:])
		if isBidi(r) {
			out = fmt.Appendf(out, "&lt;U+%04X&gt;", r)
		} else {
			out = append(out, page[i:i+n]...)
		}
		i += n
	}
	return out
}

func hasBidi(b []byte) bool {
	// Every bidi character is U+061C (0xD8 0x9C) or starts with 0xE2 0x80
	// or 0xE2 0x81: look closer only where those bytes are.
	if !bytes.Contains(b, []byte{0xD8, 0x9C}) && !bytes.Contains(b, []byte{0xE2, 0x80}) && !bytes.Contains(b, []byte{0xE2, 0x81}) {
		return false
	}
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if isBidi(r) {
			return true
		}
		b = b[n:]
	}
	return false
}
