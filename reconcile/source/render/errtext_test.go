package render

import (
	"strings"
	"testing"
)

// TestBoundText: a repeated chain of calls is said once with its count;
// what is still too long loses its middle, never its end (the cause).
func TestBoundText(t *testing.T) {
	cycle := "include: template: a.tpl:1:2: executing \"a\" at <tpl>: error calling tpl: executing \"gotpl\" at <include>: error calling "
	for _, c := range []struct {
		name, in string
		want     []string
		max      int
	}{
		{"short", "template: x: boom", []string{"template: x: boom"}, 100},
		{"a repeated chain", "t: error calling " + strings.Repeat(cycle, 500) + "include: too deep",
			[]string{"t: error calling " + cycle + "[… the 2 call(s) above, 499 times more …] include: too deep"}, 400},
		{"twice is not collapsed", "t: error calling " + strings.Repeat(cycle, 2) + "x",
			[]string{"t: error calling " + strings.Repeat(cycle, 2) + "x"}, 1000},
		{"long without repetition", strings.Repeat("é", 5000) + "the cause", []string{"bytes cut", "the cause"}, MaxErrorText + 64},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := boundText(c.in)
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("boundText = %q; want it to hold %q", got, w)
				}
			}
			if len(got) > c.max {
				t.Errorf("boundText is %d bytes, more than %d", len(got), c.max)
			}
		})
	}
}
