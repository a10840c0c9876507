package deploy_test

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/json"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"recond.dev/recond/deploy"
)

// CheckStatic accepts a Go binary built with CGO_ENABLED=0 and rejects a
// dynamically linked one.
func TestCheckStatic(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\n\nimport \"net\"\n\nfunc main() { _, _ = net.LookupHost(\"localhost\") }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "static")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, src)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	settings, err := deploy.CheckStatic(bin)
	if err != nil {
		t.Fatalf("CheckStatic(CGO_ENABLED=0 binary): %v", err)
	}
	if settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" {
		t.Errorf("build settings %v", settings)
	}
	// A dynamically linked system binary, where there is one.
	for _, p := range []string{"/bin/sh", "/usr/bin/env", "/bin/ls"} {
		f, err := elf.Open(p)
		if err != nil {
			continue
		}
		dynamic := false
		for _, prog := range f.Progs {
			dynamic = dynamic || prog.Type == elf.PT_INTERP
		}
		f.Close()
		if !dynamic {
			continue
		}
		if _, err := deploy.CheckStatic(p); err == nil {
			t.Errorf("CheckStatic(%s) accepted a dynamically linked binary", p)
		}
		return
	}
	t.Log("no dynamically linked binary found to check the negative case")
}

// dockerignore is the exclusion logic of a .dockerignore file (Docker's
// rules: patterns relative to the context root, * and ? within a path
// element, ** across them, a pattern excluding a directory excludes what is
// below it, ! re-includes, the last matching pattern wins).
type dockerignore []struct {
	re     *regexp.Regexp
	negate bool
}

func parseDockerignore(t *testing.T, file string) dockerignore {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var d dockerignore
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		negate := strings.HasPrefix(line, "!")
		line = path.Clean(strings.TrimPrefix(strings.TrimPrefix(line, "!"), "/"))
		var re strings.Builder
		re.WriteString("^")
		for i := 0; i < len(line); i++ {
			switch c := line[i]; {
			case strings.HasPrefix(line[i:], "**/"):
				re.WriteString("(.*/)?")
				i += 2
			case strings.HasPrefix(line[i:], "**"):
				re.WriteString(".*")
				i++
			case c == '*':
				re.WriteString("[^/]*")
			case c == '?':
				re.WriteString("[^/]")
			default:
				re.WriteString(regexp.QuoteMeta(string(c)))
			}
		}
		re.WriteString("$")
		d = append(d, struct {
			re     *regexp.Regexp
			negate bool
		}{regexp.MustCompile(re.String()), negate})
	}
	return d
}

// excluded reports whether file (slash-separated, relative to the context)
// is left out of the build context.
func (d dockerignore) excluded(file string) bool {
	var candidates []string
	for p := file; p != "." && p != "/"; p = path.Dir(p) {
		candidates = append(candidates, p)
	}
	out := false
	for _, pat := range d {
		for _, c := range candidates {
			if pat.re.MatchString(c) {
				out = !pat.negate
				break
			}
		}
	}
	return out
}

// The Docker build context keeps every file `go build ./cmd/recond
// ./cmd/recond-render` reads
// (go.mod, go.sum, each package's Go and embedded files) and leaves out the
// rest that matters: Git history, binaries, tests, manifests.
func TestDockerBuildContext(t *testing.T) {
	ig := parseDockerignore(t, "../.dockerignore")
	cmd := exec.Command("go", "list", "-deps", "-json", "./cmd/recond", "./cmd/recond-render")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	needed := []string{"go.mod", "go.sum"}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p struct {
			Dir                                   string
			Module                                *struct{ Path string }
			GoFiles, CgoFiles, EmbedFiles, SFiles []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		if p.Module == nil || p.Module.Path != "recond.dev/recond" {
			continue
		}
		rel, err := filepath.Rel(root, p.Dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, group := range [][]string{p.GoFiles, p.CgoFiles, p.EmbedFiles, p.SFiles} {
			for _, f := range group {
				needed = append(needed, filepath.ToSlash(filepath.Join(rel, f)))
			}
		}
	}
	if len(needed) < 10 {
		t.Fatalf("only %d files found for ./cmd/recond", len(needed))
	}
	for _, f := range needed {
		if ig.excluded(f) {
			t.Errorf(".dockerignore excludes %s, which the image's go build needs", f)
		}
	}
	for _, f := range []string{".git/HEAD", "bin/recond", "cmd/recond/main_test.go", "reconcile/tick_test.go", "deploy/base/deployment.yaml", "tools/jaeger/go.mod", "docs/deploy.md"} {
		if !ig.excluded(f) {
			t.Errorf(".dockerignore does not exclude %s", f)
		}
	}
}

// The Dockerfile builds the binaries as make build does: both, CGO_ENABLED=0,
// -trimpath, the same build tags and -ldflags (version included), into the
// same directory of the image (recond finds recond-render beside itself),
// and runs them as UID 65532 on a distroless or scratch base.
func TestDockerfileBuildsLikeMake(t *testing.T) {
	dockerfile, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	makefile, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	ldflags := regexp.MustCompile(`-ldflags "([^"]*)"`)
	mk := ldflags.FindSubmatch(makefile)
	df := ldflags.FindSubmatch(dockerfile)
	if mk == nil || df == nil {
		t.Fatalf("no -ldflags in the Makefile (%q) or the Dockerfile (%q)", mk, df)
	}
	norm := strings.NewReplacer("$(VERSION)", "VERSION", "${VERSION}", "VERSION", "$VERSION", "VERSION")
	if norm.Replace(string(mk[1])) != norm.Replace(string(df[1])) {
		t.Errorf("Dockerfile -ldflags %q, make build %q", df[1], mk[1])
	}
	tags := regexp.MustCompile(`(?m)^BUILD_TAGS\s*\?=\s*(\S+)`).FindSubmatch(makefile)
	if tags == nil || !bytes.Contains(dockerfile, []byte("-tags "+string(tags[1])+" ")) {
		t.Errorf("the Dockerfile does not build with the Makefile's BUILD_TAGS (%q)", tags)
	}
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "./cmd/recond ./cmd/recond-render", "FROM --platform=$BUILDPLATFORM golang:1.27 AS build",
		"COPY --from=build /out/recond /out/recond-render /usr/local/bin/"} {
		if !bytes.Contains(dockerfile, []byte(want)) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	final := regexp.MustCompile(`(?m)^FROM (\S+)\s*$`).FindAllSubmatch(dockerfile, -1)
	if len(final) == 0 || !(strings.HasPrefix(string(final[len(final)-1][1]), "gcr.io/distroless/static") || string(final[len(final)-1][1]) == "scratch") {
		t.Errorf("final stage %q, want distroless/static or scratch", final)
	}
	if !regexp.MustCompile(`(?m)^USER 65532(:65532)?\s*$`).Match(dockerfile) {
		t.Error("Dockerfile does not switch to USER 65532")
	}
}
