package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheck: recond refuses a render binary that is missing, not
// executable, not a render binary, or of another build or protocol, with
// an error that says which; it takes one of its own build.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	script := func(name, body string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	answer := func(build string, protocol int) string {
		return fmt.Sprintf(`cat >/dev/null; echo '{"len":0,"build":"%s","protocol":%d}'`, build, protocol)
	}
	for _, c := range []struct {
		name, path string
		want       string // in the error; "" for none
	}{
		{"of recond's build", script("same", answer("v1.2.3", Protocol), 0o755), ""},
		{"missing", filepath.Join(dir, "absent"), "is missing"},
		{"not executable", script("noexec", answer("v1.2.3", Protocol), 0o644), "is not an executable file"},
		{"a directory", dir, "is not an executable file"},
		{"another build", script("older", answer("v1.2.2", Protocol), 0o755), "is of build v1.2.2"},
		{"another protocol", script("proto", answer("v1.2.3", Protocol+1), 0o755), fmt.Sprintf("(protocol %d)", Protocol+1)},
		{"not a render binary", script("other", "echo hello", 0o755), "does not answer as a render binary"},
		{"fails", script("fails", "echo broken >&2; exit 3", 0o755), "does not answer for its version"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := (&Worker{Path: c.path}).Check(context.Background(), "v1.2.3")
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("Check: %v", err)
			case c.want == "":
				return
			case err == nil:
				t.Fatalf("Check took it; want an error saying %q", c.want)
			case !errors.Is(err, ErrBinary) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.path):
				t.Fatalf("Check: %v; want ErrBinary naming %s and saying %q", err, c.path, c.want)
			}
		})
	}
}

// TestRenderReportsPeakRSS: a render's Result says how much memory its
// process held at most.
func TestRenderReportsPeakRSS(t *testing.T) {
	p := filepath.Join(t.TempDir(), "render")
	if err := os.WriteFile(p, []byte("#!/bin/sh\ncat >/dev/null; echo '{\"len\":0}'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	res, err := (&Worker{Path: p}).Render(context.Background(), Job{Label: "plain"})
	if err != nil {
		t.Fatal(err)
	}
	if res.PeakRSS <= 0 || len(res.Manifests) != 0 {
		t.Fatalf("Result = %+v; want no objects and a peak RSS", res)
	}
}
