package main

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"recond.dev/recond/internal/testenv"
)

// A Secret's value that starts with a YAML indicator (an alias "*x", a
// tag "!!int x"), written unquoted, fails the render, and the parser's
// message would quote the value but its first character: recond diff in
// text and JSON, recond sync's log, and recond run's log, status page and
// its JSON, and its TickFailed Event say the file, the line and the
// column, never the value.
func TestValueAfterAYAMLIndicatorIsNeverShown(t *testing.T) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	core := "Xk9pQ2" + hex.EncodeToString(b)
	for _, value := range []string{"*" + core, "!!int " + core} {
		t.Run(value[:2], func(t *testing.T) {
			repo := testenv.NewRepo(t)
			repo.Commit("a value read as YAML", map[string]string{
				"secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: " + value + "\n",
				"cm.yaml":     cmYAML,
			})
			args := clusterArgs(t, repo.URL())
			var out strings.Builder
			for _, cmd := range [][]string{{"diff"}, {"diff", "--output", "json"}, {"sync"}} {
				code, stdout, stderr := recond(t, append(cmd, args...)...)
				if code == 0 {
					t.Errorf("recond %s: exit %d, want a failure", cmd, code)
				}
				out.WriteString(stdout + stderr)
			}
			if !strings.Contains(out.String(), "secret.yaml: document 1, line 6") || !strings.Contains(out.String(), "not shown") {
				t.Errorf("no output says where the parser failed:\n%s", out.String())
			}
			r := startRun(t, "1h", false, args...)
			deadline := time.Now().Add(time.Minute) // a guard against a hang: the first tick fails at once
			for !strings.Contains(r.log.String(), `"msg":"tick"`) {
				if time.Now().After(deadline) {
					t.Fatalf("no tick:\n%s", r.log.String())
				}
				time.Sleep(20 * time.Millisecond)
			}
			pages := statusPages(t, r.addr, 1)
			r.stop() // sends the Events
			out.WriteString(pages + r.log.String())
			notes := namespaceEvents(t, args[3])
			if !strings.Contains(notes, "TickFailed") {
				t.Errorf("no TickFailed Event:\n%s", notes)
			}
			out.WriteString(notes)
			if strings.Contains(out.String(), core) {
				t.Errorf("an output shows the value:\n%s", out.String())
			}
		})
	}
}
