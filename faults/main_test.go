package faults

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"recond.dev/recond/internal/testenv"
)

var (
	cp *testenv.ControlPlane
	// recondBin is the recond binary the tests run, built once by TestMain
	// (not with -short: every test here needs the control plane).
	recondBin string
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(func() int {
		if !testing.Short() && len(os.Args) > 0 {
			dir, err := os.MkdirTemp("", "recond-faults-")
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			defer os.RemoveAll(dir)
			recondBin = filepath.Join(dir, "recond")
			// recond and, beside it, its render binary.
			build := exec.Command("go", "build", "-o", dir+"/", "recond.dev/recond/cmd/recond", "recond.dev/recond/cmd/recond-render")
			build.Stdout, build.Stderr = os.Stderr, os.Stderr
			if err := build.Run(); err != nil {
				fmt.Fprintln(os.Stderr, "build recond:", err)
				return 1
			}
		}
		return testenv.RunTests(m, &cp)
	}())
}
