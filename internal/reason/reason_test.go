package reason

import "testing"

func TestKnown(t *testing.T) {
	for _, tc := range []struct {
		r    Reason
		want bool
	}{
		{Auth, true}, {Immutable, true}, {Other, true},
		{"", false}, {"Auth", false}, {"dependency-x", false},
	} {
		if got := Known(tc.r); got != tc.want {
			t.Errorf("Known(%q) = %v, want %v", tc.r, got, tc.want)
		}
	}
	seen := map[Reason]bool{}
	for _, r := range All {
		if seen[r] {
			t.Errorf("%q listed twice in All", r)
		}
		seen[r] = true
	}
}
