package main

import (
	"errors"
	"io/fs"
	"testing"
	"time"
)

func TestCgroupMemoryLimit(t *testing.T) {
	v2, v1 := cgroupMemoryFiles[0], cgroupMemoryFiles[1]
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  int64
	}{
		{"cgroup v2 limit", map[string]string{v2: "268435456\n"}, 268435456},
		{"cgroup v2 no limit", map[string]string{v2: "max\n"}, 0},
		{"cgroup v1 limit", map[string]string{v1: "134217728\n"}, 134217728},
		{"cgroup v1 unlimited", map[string]string{v1: "9223372036854771712\n"}, 0},
		{"no cgroup", map[string]string{}, 0},
		{"garbage", map[string]string{v2: "lots"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			read := func(name string) ([]byte, error) {
				if s, ok := tc.files[name]; ok {
					return []byte(s), nil
				}
				return nil, &fs.PathError{Op: "open", Path: name, Err: errors.New("no such file")}
			}
			if got := cgroupMemoryLimit(read); got != tc.want {
				t.Errorf("cgroupMemoryLimit = %d, want %d", got, tc.want)
			}
		})
	}
}

// A release follows a tick that allocated enough, at most once per
// releaseMinGap.
func TestMemoryReleaser(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	var allocated uint64
	releases := 0
	m := &memoryReleaser{
		now:       func() time.Time { return now },
		allocated: func() uint64 { return allocated },
		release:   func() { releases++ },
	}
	step := func(d time.Duration, alloc uint64, want bool) {
		t.Helper()
		now = now.Add(d)
		allocated += alloc
		if got := m.afterTick(); got != want {
			t.Fatalf("after %s and %d bytes: released %v, want %v", d, alloc, got, want)
		}
	}
	step(0, 50<<20, true)                         // a first sync
	step(time.Second, 50<<20, false)              // too soon after it
	step(releaseMinGap, 0, true)                  // the last tick's garbage, now
	step(3*time.Minute, releaseMinAlloc/2, false) // a tick that allocated little
	step(3*time.Minute, releaseMinAlloc/2, true)  // and one more: enough together
	step(3*time.Minute, 0, false)
	if releases != 3 {
		t.Errorf("%d releases, want 3", releases)
	}
}
