package revision

import "testing"

func TestAbbrev(t *testing.T) {
	for _, tc := range []struct {
		rev  string
		n    int
		want string
	}{
		{"0123456789abcdef0123456789abcdef01234567", 7, "0123456"},
		{"0123456789abcdef0123456789abcdef01234567", 12, "0123456789ab"},
		{"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", 12, "sha256:0123456789ab"},
		{"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", 7, "sha256:0123456"},
		{"abc", 7, "abc"},
		{"", 7, ""},
	} {
		if got := Abbrev(tc.rev, tc.n); got != tc.want {
			t.Errorf("Abbrev(%q, %d) = %q, want %q", tc.rev, tc.n, got, tc.want)
		}
	}
}
