package main

import (
	"strings"
	"testing"
)

const stream = `{"config":{"scanner_version":"v1.9.0","go_version":"go1.26.8"}}
{"progress":{"message":"Scanning your code"}}
{"finding":{"osv":"GO-1","fixed_version":"v1.26.9","trace":[{"module":"stdlib","version":"v1.26.8","package":"net/http","function":"Serve","receiver":"*Server"}]}}
{"finding":{"osv":"GO-1","fixed_version":"v1.26.9","trace":[{"module":"stdlib","version":"v1.26.8","package":"net/http","function":"Serve","receiver":"*Server"},{"module":"x"}]}}
{"finding":{"osv":"GO-2","fixed_version":"v0.62.0","trace":[{"module":"golang.org/x/net","version":"v0.61.0","package":"golang.org/x/net/html"}]}}
`

const moduleFinding = `{"finding":{"osv":"GO-3","fixed_version":"v0.3.7","trace":[{"module":"golang.org/x/text","version":"v0.3.5","package":"golang.org/x/text/language","function":"Parse"}]}}
`

// TestRun: only findings whose trace ends in a function count; a module's
// always fails, the standard library's fail only with -stdlib=fail; input
// that is not govulncheck's is an error.
func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name, in   string
		failStdlib bool
		code       int
		says       []string
	}{
		{"stdlib warned", stream, false, 0, []string{"reachable: GO-1 in standard library (go1.26.8) stdlib@v1.26.8, fixed in v1.26.9, via net/http.*Server.Serve", "0 in modules, 1 in the standard library"}},
		{"stdlib failed", stream, true, 3, []string{"GO-1"}},
		{"module", stream + moduleFinding, false, 3, []string{"GO-3 in module golang.org/x/text@v0.3.5", "1 in modules"}},
		{"nothing", `{"config":{"go_version":"go1.26.8"}}`, true, 0, []string{"0 in modules, 0 in the standard library"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			code, err := run(strings.NewReader(tc.in), &out, tc.failStdlib)
			if err != nil || code != tc.code {
				t.Fatalf("run = %d, %v; want %d\n%s", code, err, tc.code, out.String())
			}
			for _, s := range tc.says {
				if !strings.Contains(out.String(), s) {
					t.Errorf("output lacks %q:\n%s", s, out.String())
				}
			}
			if strings.Contains(out.String(), "GO-2") {
				t.Errorf("an unreached finding is listed:\n%s", out.String())
			}
		})
	}
	if _, err := run(strings.NewReader(`{"progress":{}}`), &strings.Builder{}, true); err == nil {
		t.Error("input without config accepted")
	}
}
