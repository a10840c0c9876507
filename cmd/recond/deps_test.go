package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// daemonPkg is the package the daemon's binary is built from.
const daemonPkg = "recond.dev/recond/cmd/recond"

// forbidden are the packages the daemon must not link, one per namespace it
// runs in: an exact import path, or, for a row ending in "/...", the path
// and every package under it.
var forbidden = []struct{ pkg, why string }{
	{"k8s.io/client-go/kubernetes", "the clientset makes a typed client for every API group; use the one group's typed client (typed/events/v1, typed/coordination/v1)"},
	// The renderers live in the render binary (cmd/recond-render), which
	// recond starts for every render: the daemon maps only the loop.
	{"recond.dev/recond/reconcile/source/render", "the renderers' common part (sealed file system, plain reader, SOPS by role): the render binary's"},
	{"recond.dev/recond/reconcile/source/renderer", "the render binary's side of the pipe"},
	{"recond.dev/recond/reconcile/source/helm", "Helm's chart renderer: the render binary's"},
	{"recond.dev/recond/reconcile/source/kustomize", "kustomize: the render binary's"},
	{"recond.dev/recond/reconcile/source/sops", "SOPS decryption: the render binary's"},
	{"helm.sh/helm/v4/...", "Helm: the render binary's"},
	{"sigs.k8s.io/kustomize/...", "kustomize and kyaml: the render binary's"},
	{"filippo.io/age/...", "age, SOPS's keys: the render binary's"},
	{"golang.org/x/net/trace", "its handlers execute html/template, which switches off the linker's dead-method elimination: build with -tags grpcnotrace (BUILD_TAGS)"},
}

// tolerated are the packages outside recond through which a forbidden
// package still comes in, each with why the daemon does not link what it
// brings (the code that would use it is never called): the check does not
// follow their imports. A row goes once the daemon no longer reaches the
// forbidden package through it; the test says when.
var tolerated = []struct{ via, pkg, why string }{
	{"k8s.io/client-go/tools/events", "k8s.io/client-go/kubernetes", "only NewEventBroadcasterAdapter takes the clientset; recond's Events use NewBroadcaster with the events/v1 client"},
	{"k8s.io/client-go/tools/leaderelection", "k8s.io/client-go/kubernetes", "only the lease candidate of coordinated leader election (leasecandidate.go, with its informers) takes the clientset; recond's elector does not use it"},
	{"k8s.io/client-go/tools/leaderelection/resourcelock", "k8s.io/client-go/kubernetes", "only resourcelock.New names the clientset's interfaces; recond builds its lock from the coordination/v1 client"},
}

// matches reports whether the import path dep is the forbidden row pkg.
func matches(pkg, dep string) bool {
	if prefix, ok := strings.CutSuffix(pkg, "/..."); ok {
		return dep == prefix || strings.HasPrefix(dep, prefix+"/")
	}
	return dep == pkg
}

// daemonDeps are the daemon's dependencies (not its tests'), each with the
// packages it imports.
func daemonDeps(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-tags", buildTags(), "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", daemonPkg).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list -deps %s: %v\n%s", daemonPkg, err, stderr)
	}
	deps := map[string][]string{}
	for l := range strings.Lines(string(out)) {
		f := strings.Fields(l)
		if len(f) > 0 {
			deps[f[0]] = f[1:]
		}
	}
	if _, ok := deps[daemonPkg]; !ok {
		t.Fatalf("go list -deps %s does not list the daemon itself:\n%s", daemonPkg, out)
	}
	return deps
}

// importChain is the shortest chain of imports from the package from to a
// package pkg matches, not going through the packages in skip; nil when
// there is none.
func importChain(deps map[string][]string, from, pkg string, skip []string) []string {
	parent := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if matches(pkg, p) {
			var chain []string
			for ; p != ""; p = parent[p] {
				chain = append(chain, p)
			}
			slices.Reverse(chain)
			return chain
		}
		if p != from && slices.Contains(skip, p) {
			continue
		}
		imports := slices.Clone(deps[p])
		slices.Sort(imports)
		for _, i := range imports {
			if _, seen := parent[i]; !seen {
				parent[i] = p
				queue = append(queue, i)
			}
		}
	}
	return nil
}

// TestDaemonDoesNotLinkForbiddenPackages fails when the daemon imports a
// forbidden package other than through a tolerated package, naming the
// chain of imports that brings it in.
func TestDaemonDoesNotLinkForbiddenPackages(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the daemon's dependencies")
	}
	deps := daemonDeps(t)
	for _, f := range forbidden {
		var skip []string
		for _, r := range tolerated {
			if r.pkg == f.pkg {
				skip = append(skip, r.via)
			}
		}
		if chain := importChain(deps, daemonPkg, f.pkg, skip); chain != nil {
			t.Errorf("the daemon links %s (forbidden: %s):\n\t%s", chain[len(chain)-1], f.why, strings.Join(chain, "\n\timports "))
		}
	}
	for _, r := range tolerated {
		if _, ok := deps[r.via]; !ok || importChain(deps, r.via, r.pkg, nil) == nil {
			t.Errorf("tolerated %s: the daemon no longer reaches %s through it; drop the row", r.via, r.pkg)
		}
	}
}

// TestForbiddenMatches pins what a row of forbidden means.
func TestForbiddenMatches(t *testing.T) {
	for _, c := range []struct {
		pkg, dep string
		want     bool
	}{
		{"k8s.io/client-go/kubernetes", "k8s.io/client-go/kubernetes", true},
		{"k8s.io/client-go/kubernetes", "k8s.io/client-go/kubernetes/typed/events/v1", false},
		{"k8s.io/client-go/kubernetes", "k8s.io/client-go/kubernetesx", false},
		{"helm.sh/helm/v4/...", "helm.sh/helm/v4", true},
		{"helm.sh/helm/v4/...", "helm.sh/helm/v4/pkg/engine", true},
		{"helm.sh/helm/v4/...", "helm.sh/helm/v4x/pkg", false},
		{"helm.sh/helm/v4/...", "helm.sh/helm", false},
	} {
		if got := matches(c.pkg, c.dep); got != c.want {
			t.Errorf("matches(%q, %q) = %v, want %v", c.pkg, c.dep, got, c.want)
		}
	}
}

// buildTags are the tags the daemon is built with (the Makefile's
// BUILD_TAGS, which it exports to the tests).
func buildTags() string {
	if tags := os.Getenv("BUILD_TAGS"); tags != "" {
		return tags
	}
	return "grpcnotrace"
}

// TestDaemonKeepsDeadMethodElimination builds the daemon as the Makefile
// does and fails when it links a template's execution: a method called by
// a name known only when the program runs (text/template's and
// html/template's evaluation) makes the linker keep every exported method
// of every type, and the binary grows by a third. A package may import a
// template package (cel-go does, for a function recond never calls): what
// counts is what is linked.
func TestDaemonKeepsDeadMethodElimination(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the daemon")
	}
	bin := filepath.Join(t.TempDir(), "recond")
	build := exec.Command("go", "build", "-tags", buildTags(), "-trimpath", "-o", bin, daemonPkg)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command("go", "tool", "nm", bin).Output()
	if err != nil {
		t.Fatalf("go tool nm: %v", err)
	}
	symbols := 0
	for l := range strings.Lines(string(out)) {
		symbols++
		f := strings.Fields(l)
		if len(f) < 3 {
			continue
		}
		name := f[len(f)-1]
		for _, p := range []string{"text/template.(*state).", "html/template.(*Template).Execute", "golang.org/x/net/trace."} {
			if strings.HasPrefix(name, p) {
				t.Errorf("the daemon links %s: dead-method elimination is off", name)
			}
		}
	}
	if symbols < 1000 {
		t.Fatalf("go tool nm listed %d symbols: not the daemon's table", symbols)
	}
}
