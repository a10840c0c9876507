package layout

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

const module = "recond.dev/recond"

// pkg is what go list says of one package of the module.
type pkg struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// list runs go list over the module.
func list(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,TestImports,XTestImports", module+"/...")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(&stdout)
	for {
		var p pkg
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// floorOf is the floor of a package of the module: the entry of floors
// that names it, or the longest "dir/..." entry that holds it.
func floorOf(path string) (int, bool) {
	rel := strings.TrimPrefix(strings.TrimPrefix(path, module), "/")
	if f, ok := floors[rel]; ok {
		return f, true
	}
	best, floor := -1, 0
	for k, f := range floors {
		dir, ok := strings.CutSuffix(k, "/...")
		if ok && (rel == dir || strings.HasPrefix(rel, dir+"/")) && len(dir) > best {
			best, floor = len(dir), f
		}
	}
	return floor, best >= 0
}

// violations are the imports of pkgs that do not point to a lower floor,
// and the packages that have no floor. Tests may import anything below
// the package they test and the test bed (internal/testenv/...).
func violations(pkgs []pkg) []string {
	var bad []string
	for _, p := range pkgs {
		own, ok := floorOf(p.ImportPath)
		if !ok {
			bad = append(bad, fmt.Sprintf("%s has no floor in floors_test.go", p.ImportPath))
			continue
		}
		check := func(imports []string, test bool) {
			for _, imp := range imports {
				if imp == p.ImportPath || !(imp == module || strings.HasPrefix(imp, module+"/")) {
					continue
				}
				if test && (strings.HasPrefix(imp, module+"/internal/testenv") || imp == module+"/internal/redact/redacttest") {
					continue
				}
				f, ok := floorOf(imp)
				switch {
				case !ok:
					bad = append(bad, fmt.Sprintf("%s imports %s, which has no floor", p.ImportPath, imp))
				case test && f > own && !strings.HasPrefix(imp, p.ImportPath+"/"):
					// A test may reach its own package's children (their
					// fixtures), and nothing above its floor.
					bad = append(bad, fmt.Sprintf("%s's tests import %s (floor %d, above %d)", p.ImportPath, imp, f, own))
				case !test && f >= own:
					bad = append(bad, fmt.Sprintf("%s (floor %d) imports %s (floor %d): an import points up or sideways", p.ImportPath, own, imp, f))
				}
			}
		}
		check(p.Imports, false)
		check(p.TestImports, true)
	}
	sort.Strings(bad)
	return bad
}

// TestFloors fails on any import that points up or sideways.
func TestFloors(t *testing.T) {
	if testing.Short() {
		t.Skip("lists the module with go list")
	}
	pkgs := list(t)
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages: the module was not read", len(pkgs))
	}
	for _, v := range violations(pkgs) {
		t.Error(v)
	}
	// Every entry names a package that exists, so that the table is the
	// layout and not a wish list.
	have := map[string]bool{}
	for _, p := range pkgs {
		have[strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")] = true
	}
	for k := range floors {
		dir, sub := strings.CutSuffix(k, "/...")
		found := have[dir]
		for p := range have {
			found = found || (sub && strings.HasPrefix(p, dir+"/"))
		}
		if !found {
			t.Errorf("floors_test.go names %q, which is not a package of the module", k)
		}
	}
}

// TestViolations checks the rule itself on a made-up module.
func TestViolations(t *testing.T) {
	saved := floors
	defer func() { floors = saved }()
	floors = map[string]int{"low": 0, "mid": 1, "high": 2, "side": 1, "tree/...": 0}
	m := func(s string) string { return module + "/" + s }
	for _, tc := range []struct {
		name string
		pkgs []pkg
		want int
	}{
		{"down is fine", []pkg{{ImportPath: m("high"), Imports: []string{m("mid"), m("low"), "fmt"}}}, 0},
		{"up fails", []pkg{{ImportPath: m("low"), Imports: []string{m("mid")}}}, 1},
		{"sideways fails", []pkg{{ImportPath: m("mid"), Imports: []string{m("side")}}}, 1},
		{"no floor fails", []pkg{{ImportPath: m("new")}}, 1},
		{"an import without a floor fails", []pkg{{ImportPath: m("high"), Imports: []string{m("new")}}}, 1},
		{"a subtree takes its floor", []pkg{{ImportPath: m("mid"), Imports: []string{m("tree/a/b")}}}, 0},
		{"a test may import below and the test bed", []pkg{{ImportPath: m("mid"), TestImports: []string{m("low"), m("internal/testenv/registry")}}}, 0},
		{"a test may not import above", []pkg{{ImportPath: m("mid"), TestImports: []string{m("high")}}}, 1},
	} {
		if got := violations(tc.pkgs); len(got) != tc.want {
			t.Errorf("%s: %d violations, want %d: %q", tc.name, len(got), tc.want, got)
		}
	}
}
