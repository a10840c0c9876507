package revision

import "strings"

// Abbrev is rev cut to n hex digits: a commit SHA's first n, or a digest's
// algorithm and the first n of its hex ("sha256:0123456789ab"). A revision
// already that short is returned whole.
func Abbrev(rev string, n int) string {
	alg, hex, isDigest := strings.Cut(rev, ":")
	if !isDigest {
		alg, hex = "", rev
	} else {
		alg += ":"
	}
	if len(hex) > n {
		hex = hex[:n]
	}
	return alg + hex
}
