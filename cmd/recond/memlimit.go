package main

import (
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// The container's memory limit, from its cgroup: cgroup v2's memory.max,
// or cgroup v1's memory.limit_in_bytes.
var cgroupMemoryFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// memoryShare is the part of the container's memory limit recond's own
// heap may grow to before the garbage collector works harder: the rest is
// for the render worker's start and the runtime's own.
const memoryShare = 0.8

// cgroupMemoryLimit reads the container's memory limit with read: 0 when
// there is none (no cgroup file, "max", or cgroup v1's "unlimited", a
// number near 2^63).
func cgroupMemoryLimit(read func(string) ([]byte, error)) int64 {
	for _, f := range cgroupMemoryFiles {
		b, err := read(f)
		if err != nil {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || n <= 0 || n >= 1<<60 {
			return 0
		}
		return n
	}
	return 0
}

// setMemoryLimit gives the Go runtime a soft memory limit of memoryShare
// of the container's, unless GOMEMLIMIT set one; it returns the limit in
// force (0: none) and where it came from.
func setMemoryLimit() (int64, string) {
	if v := os.Getenv("GOMEMLIMIT"); v != "" && v != "off" {
		return debug.SetMemoryLimit(-1), "GOMEMLIMIT"
	}
	limit := cgroupMemoryLimit(os.ReadFile)
	if limit == 0 {
		return 0, "none"
	}
	soft := int64(float64(limit) * memoryShare)
	debug.SetMemoryLimit(soft)
	return soft, "cgroup"
}
