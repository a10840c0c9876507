package main

import (
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"
)

// The container's memory limit, from its cgroup: cgroup v2's memory.max,
// or cgroup v1's memory.limit_in_bytes.
var cgroupMemoryFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// memoryShare is the part of the container's memory limit recond's own
// heap may grow to before the garbage collector works harder: the rest is
// for the runtime's own and for the render binary's processes
// (recond-render, one per render, each with its own limit,
// --render-max-memory), which count against the same container limit.
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

// After a tick, the memory it freed goes back to the operating system:
// the process spends nearly all its time waiting for the next tick, and
// the garbage a tick leaves (a first sync's dry-run results and apply
// responses, a list-mode tick's LISTs, a converged tick's diff) would
// otherwise stay resident until the garbage collector next needs room,
// which at the default GOGC is when the heap has doubled. A release costs
// one garbage collection of the live heap (some 30 ms of CPU with 3,000
// objects held). It is skipped when the tick allocated little, and made at
// most once per releaseMinGap, so that ticks triggered back to back (watch
// events, webhooks) do not pay it each.
const (
	// releaseMinAlloc is the least a tick must have allocated since the
	// last release for the next one to be worth its collection.
	releaseMinAlloc = 1 << 20
	// releaseMinGap is the least time between two releases.
	releaseMinGap = 10 * time.Second
)

// memoryReleaser returns freed memory to the operating system after ticks.
// Used by the loop's goroutine only.
type memoryReleaser struct {
	now func() time.Time
	// allocated reads the bytes allocated since the process started;
	// release collects and returns free memory (debug.FreeOSMemory).
	allocated func() uint64
	release   func()

	last       time.Time
	releasedAt uint64 // allocated at the last release
}

func newMemoryReleaser() *memoryReleaser {
	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	return &memoryReleaser{
		now: time.Now,
		allocated: func() uint64 {
			metrics.Read(sample)
			if sample[0].Value.Kind() != metrics.KindUint64 {
				return 0
			}
			return sample[0].Value.Uint64()
		},
		release: debug.FreeOSMemory,
	}
}

// afterTick releases memory when the tick(s) since the last release
// allocated releaseMinAlloc or more and the last release is releaseMinGap
// old; it reports whether it did.
func (m *memoryReleaser) afterTick() bool {
	now := m.now()
	if !m.last.IsZero() && now.Sub(m.last) < releaseMinGap {
		return false
	}
	if a := m.allocated(); a-m.releasedAt < releaseMinAlloc {
		return false
	}
	m.release()
	m.last, m.releasedAt = now, m.allocated()
	return true
}

// gcPercent is the garbage collector's target (GOGC) of `recond run` when
// the environment sets none. The runtime's default, 100, lets the heap grow
// to twice what is live before it collects, and the runtime keeps that
// much resident: for a process that holds a few MiB to a few tens of MiB
// of watch caches and desired objects and waits between ticks, that
// headroom is most of its resident memory. At 50, the heap grows to one
// and a half times what is live: some 9 MiB less resident with 900 objects
// held, for twice the collections, which stay a few per cent of a tick's
// CPU. GOGC in the environment overrides it.
const gcPercent = 50

// setGCPercent sets the garbage collector's target to gcPercent unless
// GOGC set one; it returns the target in force and where it came from.
func setGCPercent(getenv func(string) string, set func(int) int) (string, string) {
	if v := getenv("GOGC"); v != "" {
		return v, "GOGC"
	}
	set(gcPercent)
	return strconv.Itoa(gcPercent), "default"
}
