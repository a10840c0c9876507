package testenv

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
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
// finding it with ToolBin.

// UpdateFixturesEnv names the variable that makes a run write the
// tool-made fixtures of testdata/ again, with the real tools, instead of
// reading them: `make fixtures` sets it to 1.
const UpdateFixturesEnv = "RECOND_UPDATE_FIXTURES"

// UpdateFixtures says whether this run writes the tool-made fixtures again
// ($RECOND_UPDATE_FIXTURES=1).
func UpdateFixtures() bool { return os.Getenv(UpdateFixturesEnv) == "1" }

// ToolBin returns the tool binary that the environment variable env names
// (the Makefile sets it), for a test that runs the tool live. When it is
// unset or missing, the test is skipped under -short and fails otherwise,
// saying how to get it (make, a make target that builds or installs it).
func ToolBin(t testing.TB, env, make string) string {
	t.Helper()
	bin := os.Getenv(env)
	if bin == "" {
		if testing.Short() {
			t.Skipf("%s is not set (-short): `%s` provides it", env, make)
		}
		t.Fatalf("%s is not set: `%s` provides it, and the Makefile sets %s", env, make, env)
	}
	if _, err := os.Stat(bin); err != nil {
		if testing.Short() {
			t.Skipf("%s %s: %v (-short): `%s` provides it", env, bin, err, make)
		}
		t.Fatalf("%s %s: %v: `%s` provides it", env, bin, err, make)
	}
	return bin
}

// fixtureTool returns the tool binary env names for writing fixtures
// again (UpdateFixtures), failing the test when it is not set.
func fixtureTool(t testing.TB, env string) string {
	t.Helper()
	bin := os.Getenv(env)
	if bin == "" {
		t.Fatalf("%s=1 writes the fixtures with the real tools: %s must name one (make fixtures sets it)", UpdateFixturesEnv, env)
	}
	return bin
}

// ToolVersion is the version of module in the Go binary bin (its build
// information), such as helm.sh/helm/v4 in helm: what a fixture records
// of the tool that made it.
func ToolVersion(t testing.TB, bin, module string) string {
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
