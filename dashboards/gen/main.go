// Command gen writes recond's Grafana dashboards (dashboards.Build) as JSON
// files into a directory, and removes recond-*.json files there that Build no
// longer makes.
//
//	go run ./dashboards/gen [-out dashboards]   (make generate)
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"recond.dev/recond/dashboards"
)

func main() {
	out := flag.String("out", "dashboards", "directory to write the dashboards into")
	flag.Parse()
	if err := generate(*out); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func generate(dir string) error {
	files, err := dashboards.Build()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	stale, err := filepath.Glob(filepath.Join(dir, "recond-*.json"))
	if err != nil {
		return err
	}
	for _, path := range stale {
		if _, ok := files[filepath.Base(path)]; !ok {
			if err := os.Remove(path); err != nil {
				return err
			}
		}
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
