package main

import (
	"errors"
	"io/fs"
	"testing"
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
