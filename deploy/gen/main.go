// Command gen writes deploy/monitoring/dashboards.yaml: recond's Grafana
// dashboards (dashboards.Build, the source of dashboards/*.json) as
// ConfigMaps labelled grafana_dashboard: "1", so that `kubectl apply -k
// deploy/monitoring` needs nothing outside its directory.
//
//	go run ./deploy/gen [-out deploy/monitoring/dashboards.yaml]   (make generate)
package main

import (
	"flag"
	"fmt"
	"os"

	"recond.dev/recond/dashboards"
	"recond.dev/recond/deploy"
)

func main() {
	out := flag.String("out", "deploy/monitoring/dashboards.yaml", "file to write")
	flag.Parse()
	if err := generate(*out); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func generate(out string) error {
	files, err := dashboards.Build()
	if err != nil {
		return err
	}
	b, err := deploy.DashboardConfigMaps(files)
	if err != nil {
		return err
	}
	return os.WriteFile(out, b, 0o644)
}
