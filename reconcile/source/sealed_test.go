package source

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"sigs.k8s.io/kustomize/api/krusty"

	"recond.dev/recond/reconcile/source/render"
)

// tripwire is a TCP listener and a fake git, helm and kustomize first on
// PATH; they record any
// attempt to reach them.
type tripwire struct {
	addr    string
	conns   atomic.Int64
	gitLog  string
	cleanup func()
}

func newTripwire(t *testing.T) *tripwire {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tw := &tripwire{addr: ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tw.conns.Add(1)
			// Answer like a web server would, so a fetch would succeed.
			body := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fetched\n"
			fmt.Fprintf(c, "HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })

	bin := t.TempDir()
	tw.gitLog = filepath.Join(t.TempDir(), "git.log")
	script := "#!/bin/sh\necho \"$@\" >> " + tw.gitLog + "\nexit 1\n"
	for _, name := range []string{"git", "helm", "kustomize"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return tw
}

// check fails the test if anything reached the tripwire.
func (tw *tripwire) check(t *testing.T) {
	t.Helper()
	if n := tw.conns.Load(); n != 0 {
		t.Errorf("the listener saw %d connection(s), want none", n)
	}
	if b, err := os.ReadFile(tw.gitLog); err == nil {
		t.Errorf("git, helm or kustomize was run:\n%s", b)
	}
}

// locationForms are hostile spellings of a location; %s is the listener.
var locationForms = []string{
	"http://%s/x.yaml",
	"http://%s/x.yaml#x y",
	"http://%s/x.yaml\t",
	" https://%s/x.yaml",
	"http://%s/%%78.yaml",
	"http%%3A%%2F%%2F%s%%2Fx.yaml",
	"file:///etc/passwd",
	"git::http://%s/org/repo",
	"git@%s:org/repo",
	"https://%s/org/repo.git",
	"http://%s/org/repo.git//deploy?ref=main",
	"ssh://git@%s/org/repo",
	"/etc/passwd",
}

// climbForms climb out of the repository (cases live at cases/<n>).
var climbForms = []string{"../../../evil", "../../../../evil", "../../../evil/x.yaml"}

// locationFields places a location in each kustomization field that names
// one; climbs marks the fields that take a directory.
var locationFields = []struct {
	name   string
	yaml   func(loc string) string
	climbs bool
}{
	{"resources", func(l string) string { return "resources:\n- " + l }, true},
	{"bases", func(l string) string { return "bases:\n- " + l }, true},
	{"components", func(l string) string { return "resources:\n- cm.yaml\ncomponents:\n- " + l }, true},
	{"crds", func(l string) string { return "resources:\n- cm.yaml\ncrds:\n- " + l }, false},
	{"configurations", func(l string) string { return "resources:\n- cm.yaml\nconfigurations:\n- " + l }, false},
	{"generators", func(l string) string { return "generators:\n- " + l }, true},
	{"transformers", func(l string) string { return "resources:\n- cm.yaml\ntransformers:\n- " + l }, true},
	{"validators", func(l string) string { return "resources:\n- cm.yaml\nvalidators:\n- " + l }, true},
	{"patches", func(l string) string { return "resources:\n- cm.yaml\npatches:\n- path: " + l }, false},
	{"patchesStrategicMerge", func(l string) string { return "resources:\n- cm.yaml\npatchesStrategicMerge:\n- " + l }, false},
	{"patchesJson6902", func(l string) string {
		return "resources:\n- cm.yaml\npatchesJson6902:\n- target: {version: v1, kind: ConfigMap, name: cfg}\n  path: " + l
	}, false},
	{"replacements", func(l string) string { return "resources:\n- cm.yaml\nreplacements:\n- path: " + l }, false},
	{"configMapGenerator.files", func(l string) string { return "configMapGenerator:\n- name: g\n  files:\n  - " + l }, false},
	{"configMapGenerator.files key", func(l string) string {
		return "configMapGenerator:\n- name: g\n  files:\n  - " + strings.Replace(l, `"`, `"k=`, 1)
	}, false},
	{"configMapGenerator.envs", func(l string) string { return "configMapGenerator:\n- name: g\n  envs:\n  - " + l }, false},
	{"configMapGenerator.env", func(l string) string { return "configMapGenerator:\n- name: g\n  env: " + l }, false},
	{"secretGenerator.files", func(l string) string { return "secretGenerator:\n- name: g\n  files:\n  - " + l }, false},
	{"secretGenerator.envs", func(l string) string { return "secretGenerator:\n- name: g\n  envs:\n  - " + l }, false},
	{"openapi.path", func(l string) string { return "resources:\n- cm.yaml\nopenapi:\n  path: " + l }, false},
	{"helmGlobals.chartHome", func(l string) string {
		return "helmGlobals:\n  chartHome: " + l + "\nhelmCharts:\n- name: c\n  repo: " + l
	}, false},
	{"helmCharts", func(l string) string { return "helmCharts:\n- name: c\n  repo: " + l }, false},
	{"helmChartInflationGenerator", func(l string) string {
		return "helmChartInflationGenerator:\n- chartName: c\n  chartRepoUrl: " + l
	}, false},
}

type sealedCase struct{ name, dir string }

// sealedFixture commits one directory per field and form, and a hostile
// repository-like tree at evil/ that a climb would reach if it were
// clamped to the root.
func sealedFixture(t *testing.T, addr string) (dir, sha string, cases []sealedCase) {
	files := map[string]string{
		"evil/kustomization.yaml": "resources:\n- https://" + addr + "/org/repo.git\n- http://" + addr + "/x.yaml\n",
		"evil/x.yaml":             cm("evil"),
	}
	add := func(name, loc string, yaml func(string) string) {
		q, _ := json.Marshal(loc)
		d := fmt.Sprintf("cases/%d", len(cases))
		files[d+"/kustomization.yaml"] = yaml(string(q)) + "\n"
		files[d+"/cm.yaml"] = cm("cfg")
		cases = append(cases, sealedCase{name: name + " " + loc, dir: d})
	}
	for _, f := range locationFields {
		for _, form := range locationForms {
			loc := form
			if strings.Contains(form, "%s") {
				loc = fmt.Sprintf(form, addr)
			} else {
				loc = strings.ReplaceAll(form, "%%", "%")
			}
			add(f.name, loc, f.yaml)
		}
		if f.climbs {
			for _, c := range climbForms {
				add(f.name, c, f.yaml)
			}
		}
	}
	dir = t.TempDir()
	sha = newTestRepo(t, dir).commit(files)
	return dir, sha, cases
}

func TestRenderSealed(t *testing.T) {
	tw := newTripwire(t)
	dir, sha, cases := sealedFixture(t, tw.addr)
	for _, worker := range []*Worker{nil, testWorker(t)} {
		for _, c := range cases {
			t.Run(fmt.Sprintf("worker=%t/%s", worker != nil, c.name), func(t *testing.T) {
				ms, err := mustNew(t, Config{URL: dir, Path: c.dir, Worker: worker}).Render(context.Background(), sha)
				var me *ManifestError
				if !errors.As(err, &me) {
					t.Fatalf("Render() = %v, %v; want a *ManifestError", names(ms), err)
				}
			})
		}
	}
	tw.check(t)
}

// TestKustomizeSealedWithoutPrecheck runs kustomize on the tree file system
// without the kustomization pre-check, so that only the patched kustomize
// and the file system stand between a repository and the network.
func TestKustomizeSealedWithoutPrecheck(t *testing.T) {
	tw := newTripwire(t)
	dir, sha, cases := sealedFixture(t, tw.addr)
	s := mustNew(t, Config{URL: dir})
	tr, err := s.f.Open(sha)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tfs := render.NewFS(context.Background(), tr.Root, render.NewBudget(DefaultLimits))
			rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(tfs, render.Abs(c.dir))
			if err == nil {
				out, _ := rm.AsYaml()
				if strings.Contains(string(out), "fetched") || strings.Contains(string(out), "evil") {
					t.Errorf("kustomize read from outside the repository:\n%s", out)
				}
			}
		})
	}
	tw.check(t)
}

// TestKustomizeForkImportsNoNetworkOrExec checks that no package of the
// kustomize fork that the render binary links imports net/http, os/exec or
// plugin.
func TestKustomizeForkImportsNoNetworkOrExec(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	cmd := exec.Command("go", "list", "-deps", "-f",
		`{{if .Module}}{{if eq .Module.Path "sigs.k8s.io/kustomize/api"}}{{.ImportPath}} {{join .Imports " "}}{{end}}{{end}}`,
		"recond.dev/recond/cmd/recond-render")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	pkgs := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line == "" {
			continue
		}
		pkgs++
		fields := strings.Fields(line)
		for _, imp := range fields[1:] {
			switch imp {
			case "net/http", "os/exec", "plugin", "net":
				t.Errorf("%s imports %s", fields[0], imp)
			}
		}
	}
	if pkgs < 10 {
		t.Errorf("go list found %d kustomize packages, want the whole fork:\n%s", pkgs, out)
	}
}
