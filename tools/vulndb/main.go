package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"

	"golang.org/x/mod/module"
)

// vulndbModule is the module whose data/osv the database is made from; its
// version comes from this module's go.mod.
const vulndbModule = "golang.org/x/vulndb"

func main() {
	log.SetFlags(0)
	out := flag.String("out", "", "directory to write the database to (required; left alone if it holds one)")
	flag.Parse()
	if *out == "" {
		log.Fatal("vulndb: -out is required")
	}
	dir, version, err := locate()
	if err != nil {
		log.Fatalf("vulndb: %v", err)
	}
	snapshot, err := module.PseudoVersionTime(version)
	if err != nil {
		log.Fatalf("vulndb: %s@%s is not a pseudo-version, so it names no commit time: %v", vulndbModule, version, err)
	}
	s, err := Ensure(filepath.Join(dir, "data", "osv"), snapshot.UTC(), *out)
	if err != nil {
		log.Fatalf("vulndb: %v", err)
	}
	fmt.Printf("%s: %s@%s, %d entries over %d modules, modified %s\n",
		*out, vulndbModule, version, s.Entries, s.Modules, s.Modified.Format("2006-01-02T15:04:05Z"))
}

// locate returns the directory and version of the pinned golang.org/x/vulndb,
// downloading it through the module proxy into the module cache if needed.
func locate() (dir, version string, err error) {
	cmd := exec.Command("go", "mod", "download", "-json", vulndbModule)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return "", "", fmt.Errorf("go mod download %s: %w: %s", vulndbModule, err, stderr.Bytes())
	}
	var m struct{ Dir, Version, Error string }
	if err := json.Unmarshal(b, &m); err != nil {
		return "", "", fmt.Errorf("decode go mod download output: %w", err)
	}
	if m.Error != "" || m.Dir == "" {
		return "", "", fmt.Errorf("go mod download %s: %s", vulndbModule, m.Error)
	}
	if _, err := os.Stat(filepath.Join(m.Dir, "data", "osv")); err != nil {
		return "", "", fmt.Errorf("%s@%s has no OSV entries: %w", vulndbModule, m.Version, err)
	}
	return m.Dir, m.Version, nil
}
