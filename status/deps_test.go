package status

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// TestNoTemplatePackage: neither the status package nor anything it
// imports uses html/template or text/template. A binary that links either
// loses the linker's dead-method elimination: their method calls by name
// (reflect's MethodByName) keep every exported method of every type alive.
// On failure it names the import chain to each.
func TestNoTemplatePackage(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	const self = "recond.dev/recond/status"
	cmd := exec.Command(goCmd, "list", "-deps", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", self)
	cmd.Env = os.Environ()
	if v := runtime.Version(); strings.HasPrefix(v, "go") {
		// The toolchain that built this test, whatever go is on PATH.
		cmd.Env = append(cmd.Env, "GOTOOLCHAIN="+v)
	}
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list -deps %s: %v\n%s", self, err, stderr)
	}
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		imports[f[0]] = f[1:]
	}
	if _, ok := imports[self]; !ok {
		t.Fatalf("go list -deps %s does not list it:\n%s", self, out)
	}
	for _, tmpl := range []string{"html/template", "text/template"} {
		if _, ok := imports[tmpl]; ok {
			t.Errorf("%s depends on %s: %s", self, tmpl, strings.Join(chain(imports, self, tmpl), " -> "))
		}
	}
}

// chain is a shortest import chain from one package to another in imports.
func chain(imports map[string][]string, from, to string) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == to {
			var c []string
			for ; p != ""; p = prev[p] {
				c = append([]string{p}, c...)
			}
			return c
		}
		for _, q := range imports[p] {
			if _, seen := prev[q]; !seen {
				prev[q] = p
				queue = append(queue, q)
			}
		}
	}
	return nil
}
