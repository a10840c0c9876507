package tools

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Tools and fixtures. What a tool makes once (a cosign signature, a
// SOPS-encrypted file, a chart `helm push` made, `helm template`'s output)
// is committed under the reading test's testdata/ with the script that
// makes it again (`make fixtures`); a test reads it there and needs no
// tool. Only a test about the tool's own behaviour runs the tool live,
// finding it with Find.

// UpdateFixturesEnv names the variable that makes a run write the
// tool-made fixtures of testdata/ again, with the real tools, instead of
// reading them: `make fixtures` sets it to 1.
const UpdateFixturesEnv = "RECOND_UPDATE_FIXTURES"

// UpdateFixtures says whether this run writes the tool-made fixtures again
// ($RECOND_UPDATE_FIXTURES=1).
func UpdateFixtures() bool { return os.Getenv(UpdateFixturesEnv) == "1" }

// FixtureTool returns tool's binary for writing fixtures again
// (UpdateFixtures), failing the test when it is not there.
func FixtureTool(t testing.TB, tool Tool) string {
	t.Helper()
	bin, err := Lookup(tool)
	if err != nil {
		t.Fatalf("%s=1 writes the fixtures with the real tools (make fixtures provides them): %v", UpdateFixturesEnv, err)
	}
	return bin
}

// Version is the version of module in the Go binary bin (its build
// information), such as helm.sh/helm/v4 in helm: what a fixture records
// of the tool that made it.
func Version(t testing.TB, bin, module string) string {
	t.Helper()
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatalf("%s: %v", bin, err)
	}
	if bi.Main.Path == module && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	for _, m := range bi.Deps {
		if m.Path == module {
			if m.Replace != nil {
				return m.Replace.Version
			}
			return m.Version
		}
	}
	t.Fatalf("%s was not built from %s", bin, module)
	return ""
}

// PinnedVersion is the version of module that tools/TOOL/go.mod pins (the
// tool the Makefile builds), read from the repository the test runs in:
// a fixture made by another version must be made again.
func PinnedVersion(t testing.TB, tool, module string) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.HasPrefix(string(b), "module recond.dev/recond\n") {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no recond.dev/recond go.mod above the test's directory")
		}
		dir = parent
	}
	path := filepath.Join(dir, "tools", tool, "go.mod")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == module {
			return f[1]
		}
	}
	t.Fatalf("%s does not pin %s", path, module)
	return ""
}

// MadeByPinned fails the test when the version file of a fixture (what
// the tool that made it wrote: "v2.6.5") does not name the version of
// module that tools/TOOL/go.mod pins: the fixture must be made again.
func MadeByPinned(t testing.TB, versionFile, tool, module string) {
	t.Helper()
	b, err := os.ReadFile(versionFile)
	if err != nil {
		t.Fatalf("%v: make fixtures writes it", err)
	}
	if got, pinned := strings.TrimSpace(string(b)), PinnedVersion(t, tool, module); got != pinned {
		t.Fatalf("%s: made by %s %s, tools/%s pins %s: make fixtures makes it again", filepath.Dir(versionFile), tool, got, tool, pinned)
	}
}

// fixtureTexts counts the FixtureText calls of each test.
var fixtureTexts sync.Map // testing.TB -> *int

// FixtureText is a value that looks random (24 hex digits) and that no
// output holds by chance, but is the same at every run of the test: the
// n-th call of a test gives the n-th value of its name. Inputs of a tool
// whose output is a fixture (SOPS) are made of it, so that the fixture is
// found again.
func FixtureText(t testing.TB) string {
	t.Helper()
	v, loaded := fixtureTexts.LoadOrStore(t, new(int))
	if !loaded {
		t.Cleanup(func() { fixtureTexts.Delete(t) })
	}
	n := v.(*int)
	*n++
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s#%d", t.Name(), *n)))
	return hex.EncodeToString(sum[:12])
}

// WriteJSON writes v into the fixture file path, indented.
func WriteJSON(t testing.TB, path string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// ReadJSON reads the fixture file path into v; a missing file fails the
// test, saying that make fixtures writes it.
func ReadJSON(t testing.TB, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: make fixtures writes it", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
