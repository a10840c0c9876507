package watch

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestRelistDelay(t *testing.T) {
	const period = 30 * time.Minute
	hi := period + time.Duration(RelistJitter*float64(period))
	for _, r := range []float64{0, 0.5, 0.999999} {
		if d := relistDelay(period, r); d < period || d >= hi {
			t.Errorf("relistDelay(%v, %v) = %v, want in [%v, %v)", period, r, d, period, hi)
		}
	}
	seen := map[time.Duration]bool{}
	for range 1000 {
		d := relistDelay(period, rand.Float64())
		if d < period || d >= hi {
			t.Fatalf("relistDelay = %v, want in [%v, %v)", d, period, hi)
		}
		seen[d.Truncate(time.Second)] = true
	}
	// 1000 draws over 900 seconds of spread: lockstep would give one value.
	if len(seen) < 300 {
		t.Errorf("relist delays took %d distinct seconds in 1000 draws, want a spread", len(seen))
	}
}

func TestWatchTimeout(t *testing.T) {
	tests := []struct {
		min  time.Duration
		r    float64
		want time.Duration
	}{
		{5 * time.Minute, 0, 5 * time.Minute},
		{5 * time.Minute, 0.5, 450 * time.Second},
		{5 * time.Minute, 0.9999, 599 * time.Second},
		{time.Second, 0.3, time.Second},
		{100 * time.Millisecond, 0, time.Second}, // whole seconds, at least one
	}
	for _, tt := range tests {
		if got := watchTimeout(tt.min, tt.r); got != tt.want {
			t.Errorf("watchTimeout(%v, %v) = %v, want %v", tt.min, tt.r, got, tt.want)
		}
	}
}
