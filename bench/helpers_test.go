package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// benchOnly skips t unless RECOND_BENCH=1: the benchmarks run in `make
// bench`, never in `make test`.
func benchOnly(t *testing.T) {
	t.Helper()
	if os.Getenv("RECOND_BENCH") != "1" {
		t.Skip("set RECOND_BENCH=1 (make bench)")
	}
}

// goBuild builds the command pkg (a path relative to bench/) as users get
// it (trimmed, stripped) into a temporary directory, as name, and returns
// its path.
func goBuild(t *testing.T, name, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	if out, err := exec.Command("go", "build", "-tags", "grpcnotrace", "-trimpath", "-ldflags", "-s -w", "-o", bin, pkg).CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", name, err, out)
	}
	return bin
}

// buildRecond builds the recond binary and its render binary beside it as
// the Makefile does (stripped, trimmed) into a temporary directory and
// returns recond's path.
func buildRecond(t *testing.T) string {
	t.Helper()
	bin := goBuild(t, "recond", "../cmd/recond")
	render := filepath.Join(filepath.Dir(bin), "recond-render")
	if out, err := exec.Command("go", "build", "-tags", "grpcnotrace", "-trimpath", "-ldflags", "-s -w", "-o", render, "../cmd/recond-render").CombinedOutput(); err != nil {
		t.Fatalf("build recond-render: %v\n%s", err, out)
	}
	return bin
}

// buildFluxFleet builds bench/internal/fluxfleet as buildRecond builds
// recond and returns its path.
func buildFluxFleet(t *testing.T) string {
	t.Helper()
	return goBuild(t, "fluxfleet", "./internal/fluxfleet")
}

// renderBinary is the render binary buildRecond built beside recond (bin).
func renderBinary(bin string) string { return filepath.Join(filepath.Dir(bin), "recond-render") }
