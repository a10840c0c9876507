// Command render builds every kustomization below a directory (kustomize
// build, in-process) into one YAML file each:
//
//	go run ./deploy/render [-root deploy] [-out bin/manifests]   (make manifests)
//
// deploy/examples/two-tenants is written to bin/manifests/examples-two-tenants.yaml.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"recond.dev/recond/deploy"
)

func main() {
	root := flag.String("root", "deploy", "directory holding the kustomizations")
	out := flag.String("out", "bin/manifests", "directory to write the rendered manifests into")
	flag.Parse()
	if err := render(*root, *out); err != nil {
		fmt.Fprintln(os.Stderr, "render:", err)
		os.Exit(1)
	}
}

func render(root, out string) error {
	dirs, err := deploy.Kustomizations(root)
	if err != nil {
		return err
	}
	if len(dirs) == 0 {
		return fmt.Errorf("no kustomization below %s", root)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, dir := range dirs {
		r, err := deploy.Render(filepath.Join(root, dir))
		if err != nil {
			return err
		}
		name := deploy.OutputName(dir)
		if dir == "." { // root itself is a kustomization
			abs, err := filepath.Abs(root)
			if err != nil {
				return err
			}
			name = deploy.OutputName(filepath.Base(abs))
		}
		dst := filepath.Join(out, name)
		if err := os.WriteFile(dst, r.YAML, 0o644); err != nil {
			return err
		}
		fmt.Printf("%-40s %s (%d objects)\n", filepath.Join(root, dir), dst, len(r.Objects))
	}
	return nil
}
