package faults

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestMatrixNamesRealTests: every row of the fault matrix in
// docs/reliability.md names at least one test, every test it names exists
// (a func in a _test.go file of the module), and there are at least 30 rows.
func TestMatrixNamesRealTests(t *testing.T) {
	doc, err := os.ReadFile("../docs/reliability.md")
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string]bool{}
	decl := regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark)\w+)\(`)
	err = filepath.WalkDir("..", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "third_party" || d.Name() == "tools" || strings.HasPrefix(d.Name(), ".")) && p != ".." {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllSubmatch(b, -1) {
			defined[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	section := string(doc)
	start := strings.Index(section, "## Fault matrix")
	if start < 0 {
		t.Fatal(`docs/reliability.md has no "## Fault matrix" section`)
	}
	section = section[start+len("## Fault matrix"):]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	name := regexp.MustCompile("`(?:[a-z/]+\\.)?((?:Test|Fuzz)\\w+)(?:/[^`]*)?`")
	rows := 0
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| Fault") || strings.HasPrefix(line, "|---") {
			continue
		}
		rows++
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		tests := name.FindAllStringSubmatch(cells[len(cells)-1], -1)
		if len(tests) == 0 {
			t.Errorf("row names no test: %s", line)
		}
		for _, m := range tests {
			if !defined[m[1]] {
				t.Errorf("row names %s, which no _test.go defines: %s", m[1], line)
			}
		}
	}
	if rows < 30 {
		t.Errorf("the fault matrix has %d rows, want at least 30", rows)
	}
}
