package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"recond.dev/recond/reconcile/source/worker"
)

// footprint shows what one instance costs: recond links only the loop, and
// every render ran in recond-render, a process of its own that exited
// after it; recond's resident memory once the namespace converged.
func footprint(s *session) error {
	say("footprint: recond links only the loop; every render ran in %s, one process per render", worker.Binary)
	for _, bin := range []string{s.recondBin, filepath.Join(filepath.Dir(s.recondBin), worker.Binary)} {
		fi, err := os.Stat(bin)
		if err != nil {
			return err
		}
		fmt.Printf("  %-14s %5.1f MB\n", filepath.Base(bin), float64(fi.Size())/1e6)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.run.Process.Pid))
	if err != nil {
		return err
	}
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			fmt.Printf("  recond's resident memory after the first sync: %.1f MiB\n", float64(kb)/1024)
		}
	}
	return nil
}
