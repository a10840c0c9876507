package cluster_test

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeVerbs are the methods of client-go's clients that write.
var writeVerbs = []string{"Create", "Update", "UpdateStatus", "Patch", "Apply", "ApplyStatus", "Delete", "DeleteCollection"}

// notGated are the packages whose writes are not the namespace's objects:
// the Lease that fences every other write, and the Events that report them.
// Test beds and benchmarks are not shipped.
var notGated = []string{
	"recond.dev/recond/leader",
	"recond.dev/recond/events",
}

// Every write the shipped code makes to the API server goes through the
// write gate: the type checker finds every call of a client-go write
// method in the module's packages, and each must stand in a function of
// reconcile/cluster that asks the gate (admit) first, or in a package whose
// writes are not the namespace's objects (notGated). A new write path made
// beside the gate fails here.
func TestEveryWriteIsGated(t *testing.T) {
	if testing.Short() {
		t.Skip("type-checks the module")
	}
	cmd := exec.Command("go", "list", "-export", "-json=ImportPath,Dir,GoFiles,Export,Module,Standard", "-deps", "recond.dev/recond/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	type pkg struct {
		ImportPath, Dir, Export string
		GoFiles                 []string
		Standard                bool
		Module                  *struct{ Path string }
	}
	exports := map[string]string{}
	var mine []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		exports[p.ImportPath] = p.Export
		if p.Module != nil && p.Module.Path == "recond.dev/recond" {
			mine = append(mine, p)
		}
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok || f == "" {
			return nil, os.ErrNotExist
		}
		return os.Open(f)
	})
	checked, gatedSeen := 0, 0
	for _, p := range mine {
		if skipped(p.ImportPath) {
			continue
		}
		var files []*ast.File
		for _, f := range p.GoFiles {
			af, err := parser.ParseFile(fset, filepath.Join(p.Dir, f), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, af)
		}
		info := &types.Info{Selections: map[*ast.SelectorExpr]*types.Selection{}, Uses: map[*ast.Ident]types.Object{}}
		conf := types.Config{Importer: imp.(types.ImporterFrom), Error: func(error) {}}
		if _, err := conf.Check(p.ImportPath, fset, files, info); err != nil {
			t.Fatalf("type-check %s: %v", p.ImportPath, err)
		}
		checked++
		for _, f := range files {
			for _, decl := range f.Decls {
				fd, ok := decl.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				asksGate := false
				ast.Inspect(fd.Body, func(n ast.Node) bool {
					if c, ok := n.(*ast.CallExpr); ok {
						if s, ok := c.Fun.(*ast.SelectorExpr); ok && s.Sel.Name == "admit" {
							asksGate = true
						}
					}
					return true
				})
				ast.Inspect(fd.Body, func(n ast.Node) bool {
					s, ok := n.(*ast.SelectorExpr)
					if !ok || !slices.Contains(writeVerbs, s.Sel.Name) {
						return true
					}
					obj := info.Uses[s.Sel]
					fn, ok := obj.(*types.Func)
					if !ok || fn.Pkg() == nil || !strings.HasPrefix(fn.Pkg().Path(), "k8s.io/client-go/") {
						return true
					}
					where := fset.Position(s.Pos())
					switch {
					case slices.Contains(notGated, p.ImportPath):
					case p.ImportPath == "recond.dev/recond/reconcile/cluster" && asksGate:
						gatedSeen++
					default:
						t.Errorf("%s: %s calls %s.%s outside the write gate (reconcile/cluster's gated methods)", where, fd.Name.Name, fn.Pkg().Path(), s.Sel.Name)
					}
					return true
				})
			}
		}
	}
	// The test finds what it looks for: every gated write method of the
	// Client (Apply, ApplyAs, Prune, Delete, DeleteForeground, MergePatch,
	// Seed) was seen.
	if checked < 10 || gatedSeen < 7 {
		t.Fatalf("checked %d packages and saw %d gated writes: the scan found less than the module holds", checked, gatedSeen)
	}
}

func skipped(path string) bool {
	for _, p := range []string{"recond.dev/recond/internal/testenv", "recond.dev/recond/bench", "recond.dev/recond/hack", "recond.dev/recond/tools", "recond.dev/recond/faults"} {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}
