package main

import (
	"strconv"
	"testing"
)

func TestSetGCPercent(t *testing.T) {
	tests := []struct {
		name     string
		env      map[string]string
		want     string
		wantFrom string
		wantSet  int // the target set; 0: none
	}{
		{"default", nil, strconv.Itoa(gcPercent), "default", gcPercent},
		{"GOGC set", map[string]string{"GOGC": "200"}, "200", "GOGC", 0},
		{"GOGC off", map[string]string{"GOGC": "off"}, "off", "GOGC", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := 0
			got, from := setGCPercent(func(k string) string { return tt.env[k] }, func(p int) int { set = p; return 100 })
			if got != tt.want || from != tt.wantFrom || set != tt.wantSet {
				t.Errorf("setGCPercent = %q, %q, set %d; want %q, %q, set %d", got, from, set, tt.want, tt.wantFrom, tt.wantSet)
			}
		})
	}
	if gcPercent <= 0 || gcPercent >= 100 {
		t.Errorf("gcPercent = %d: want a target below the runtime's default, 100", gcPercent)
	}
}
