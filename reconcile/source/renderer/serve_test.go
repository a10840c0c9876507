package renderer

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// TestCollectLate: the render binary's collector waits for a heap of
// firstCollection under a soft memory limit that low, and the first
// collection gives back the settings it had.
func TestCollectLate(t *testing.T) {
	limit, percent := debug.SetMemoryLimit(-1), debug.SetGCPercent(-1)
	debug.SetGCPercent(percent)
	if percent < 0 {
		t.Skip("GOGC=off: collectLate leaves the collector as it is")
	}
	defer func() { debug.SetMemoryLimit(limit); debug.SetGCPercent(percent) }()
	if limit < firstCollection {
		debug.SetMemoryLimit(math.MaxInt64)
		limit = math.MaxInt64
	}

	collectLate()
	if got := debug.SetMemoryLimit(-1); got != firstCollection {
		t.Fatalf("memory limit %d before the first collection, want %d", got, firstCollection)
	}
	deadline := time.Now().Add(10 * time.Second)
	for debug.SetMemoryLimit(-1) != limit {
		if time.Now().After(deadline) {
			t.Fatalf("memory limit %d after collections, want %d again", debug.SetMemoryLimit(-1), limit)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if got := debug.SetGCPercent(percent); got != percent {
		t.Errorf("GC percent %d after the first collection, want %d", got, percent)
	}
}
