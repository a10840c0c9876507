package redact

import "strings"

// KeyRune reports whether a Secret's or a ConfigMap's key may hold r:
// ASCII letters and digits, '-', '_' and '.'.
func KeyRune(r rune) bool {
	return r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
}

// maxKey is the longest key a Secret may hold.
const maxKey = 253

// SafeKey shows k, a Secret's key as written in Git or quoted by the API
// server: k itself when a Secret may hold it as a key ("DB_PASSWORD"),
// else k up to its first character a key may not hold, then "…"
// ("DB_PASSWORD…" for "DB_PASSWORD: Hunter2"), or "…" alone when that is
// its first character or every character is one a key may hold (too long,
// or a "." or ".." path). A key the API refuses is often a value written
// the wrong way (an env file's line "DB_PASSWORD: Hunter2" became a key):
// what follows the first such character may be a value.
func SafeKey(k string) string {
	if validKey(k) {
		return k
	}
	for i, r := range k {
		if !KeyRune(r) {
			return k[:i] + "…"
		}
	}
	return "…"
}

// validKey is the API server's rule for a key (IsConfigMapKey).
func validKey(k string) bool {
	if k == "" || len(k) > maxKey || k == "." || strings.HasPrefix(k, "..") {
		return false
	}
	for _, r := range k {
		if !KeyRune(r) {
			return false
		}
	}
	return true
}
