// Command gen writes recond's generated alerting rules:
// alerts/recond.rules.yaml and deploy/monitoring/prometheusrule.yaml.
//
//	go run ./alerts/gen   (make generate)
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"recond.dev/recond/alerts"
)

func main() {
	for path, content := range alerts.Files() {
		b, err := content()
		if err == nil {
			err = os.MkdirAll(filepath.Dir(path), 0o755)
		}
		if err == nil {
			err = os.WriteFile(path, b, 0o644)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "gen %s: %v\n", path, err)
			os.Exit(1)
		}
	}
}
