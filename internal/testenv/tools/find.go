package tools

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Missing is what a test does when a tool it needs is not found.
type Missing int

// The values of Missing.
const (
	// SkipShort skips the test under -short and fails it otherwise: a tool
	// `make test` provides.
	SkipShort Missing = iota
	// Skip skips the test.
	Skip
	// Fail fails the test.
	Fail
)

// Tool is a binary the tests run and where it is found: the file Env names,
// else Name in the directory DirEnv names, else the first of PATH on $PATH.
type Tool struct {
	// Name is the binary's file name.
	Name string
	// Env names the variable naming the binary (the Makefile sets it).
	Env string
	// DirEnv names the variable naming the directory that holds Name.
	DirEnv string
	// PATH lists the names looked up on $PATH when no variable is set.
	PATH []string
	// Provide says what provides the tool: a make target, a package.
	Provide string
	// Missing is what a test does without it.
	Missing Missing
}

// The tools the tests run.
var (
	// KubeAPIServer and Etcd are the control plane envtest starts.
	KubeAPIServer = Tool{Name: "kube-apiserver", DirEnv: "KUBEBUILDER_ASSETS",
		Provide: "run the tests with `make test`, which builds kube-apiserver and etcd"}
	Etcd = Tool{Name: "etcd", DirEnv: "KUBEBUILDER_ASSETS",
		Provide: "run the tests with `make test`, which builds kube-apiserver and etcd"}
	// Jaeger receives and serves the traces of the end-to-end tests.
	Jaeger = Tool{Name: "jaeger", Env: "JAEGER_BIN", Provide: "`make tools` builds it"}
	// Promtool checks the scrape configuration and runs the rule tests.
	Promtool = Tool{Name: "promtool", Env: "PROMTOOL", Provide: "run the tests with `make test`, which builds promtool"}
	// Prometheus scrapes recond and evaluates the alert rules.
	Prometheus = Tool{Name: "prometheus", Env: "PROMETHEUS_BIN", PATH: []string{"prometheus"},
		Provide: "run the tests with `make test`, which installs one (`make prometheus`)", Missing: Fail}
	// Registry is Debian's docker-registry (CNCF distribution 2.8).
	Registry = Tool{Name: "docker-registry", Env: "REGISTRY_BIN", PATH: []string{"docker-registry"},
		Provide: "`make registry` installs Debian's docker-registry package", Missing: Skip}
	// Helm, SOPS and Cosign made the fixtures under testdata/.
	Helm   = Tool{Name: "helm", Env: "HELM_BIN", Provide: "`make fixtures` builds it"}
	SOPS   = Tool{Name: "sops", Env: "SOPS_BIN", Provide: "`make fixture-tools` builds it"}
	Cosign = Tool{Name: "cosign", Env: "COSIGN_BIN", Provide: "`make fixtures` builds it"}
	// AgeKeygen makes the age keys of the SOPS fixtures.
	AgeKeygen = Tool{Name: "age-keygen", PATH: []string{"age-keygen"},
		Provide: "`make age` installs Debian's age package", Missing: Fail}
	// Chromium renders the status page and the screenshots.
	Chromium = Tool{Name: "chromium", PATH: []string{"chromium-headless-shell", "chromium"},
		Provide: "`make chromium` installs Debian's chromium-headless-shell package", Missing: Fail}
	// Git serves repositories over smart HTTP (git http-backend).
	Git = Tool{Name: "git", PATH: []string{"git"}, Provide: "install Debian's git package", Missing: Skip}
)

// Lookup finds tool, or says why it is not there. A variable that is set
// wins, and the file it names must exist.
func Lookup(tool Tool) (string, error) {
	var bin, from string
	switch {
	case tool.Env != "" && os.Getenv(tool.Env) != "":
		bin, from = os.Getenv(tool.Env), tool.Env
	case tool.DirEnv != "" && os.Getenv(tool.DirEnv) != "":
		bin, from = filepath.Join(os.Getenv(tool.DirEnv), tool.Name), tool.DirEnv
	default:
		for _, name := range tool.PATH {
			if p, err := exec.LookPath(name); err == nil {
				return p, nil
			}
		}
		var where []string
		for _, env := range []string{tool.Env, tool.DirEnv} {
			if env != "" {
				where = append(where, env+" is not set")
			}
		}
		if len(tool.PATH) > 0 {
			where = append(where, "no "+strings.Join(tool.PATH, " or ")+" on PATH")
		}
		return "", fmt.Errorf("%s: %s: %s", tool.Name, strings.Join(where, ", "), tool.Provide)
	}
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("%s (%s): %w: %s", tool.Name, from, err, tool.Provide)
	}
	return bin, nil
}

// Find returns tool's binary; without it the test is skipped or fails, as
// tool.Missing says, naming what provides it.
func Find(t testing.TB, tool Tool) string {
	t.Helper()
	bin, err := Lookup(tool)
	if err == nil {
		return bin
	}
	switch {
	case tool.Missing == Skip:
		t.Skip(err)
	case tool.Missing == SkipShort && testing.Short():
		t.Skipf("%v (-short)", err)
	}
	t.Fatal(err)
	return ""
}
