package main

import (
	"context"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"
)

// The start-up delay is the drawn fraction of --start-jitter, always less
// than the jitter, and none without one; a draw outside [0, 1) is held
// inside it.
func TestStartDelayBounds(t *testing.T) {
	const j = 10 * time.Second
	for _, tc := range []struct {
		name   string
		jitter time.Duration
		frac   float64
		want   time.Duration
	}{
		{"no jitter", 0, 0.7, 0},
		{"negative jitter", -j, 0.7, 0},
		{"draw 0", j, 0, 0},
		{"draw a quarter", j, 0.25, j / 4},
		{"draw a half", j, 0.5, j / 2},
		{"largest draw", j, math.Nextafter(1, 0), j - 1},
		{"draw 1 (out of range)", j, 1, j - 1},
		{"draw above 1", j, 7, j - 1},
		{"negative draw", j, -0.5, 0},
		{"NaN draw", j, math.NaN(), 0},
		{"one nanosecond", 1, 0.99, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := startDelay(tc.jitter, tc.frac)
			if got != tc.want {
				t.Errorf("startDelay(%v, %v) = %v, want %v", tc.jitter, tc.frac, got, tc.want)
			}
			if got < 0 || tc.jitter > 0 && got >= tc.jitter {
				t.Errorf("startDelay(%v, %v) = %v: outside [0, jitter)", tc.jitter, tc.frac, got)
			}
		})
	}
}

// app.jitter draws its fraction from jitterFraction: the default source
// stays within [0, jitter) over many draws, and an injected one is used
// as it is.
func TestStartJitterDrawsFromTheRandomSource(t *testing.T) {
	const j = time.Minute
	for range 10000 {
		if d := startDelay(j, jitterFraction()); d < 0 || d >= j {
			t.Fatalf("a default draw gave %v, outside [0, %v)", d, j)
		}
	}
	old := jitterFraction
	t.Cleanup(func() { jitterFraction = old })
	draws := 0
	jitterFraction = func() float64 { draws++; return 0 }
	a := &app{opts: &options{startJitter: j}, log: slog.New(slog.DiscardHandler)}
	if !a.jitter(context.Background()) {
		t.Error("a draw of 0 waited, or reported a stop")
	}
	if draws != 1 {
		t.Errorf("jitterFraction called %d times, want 1", draws)
	}
}

// A stop during the start-up jitter ends the wait: nothing campaigns or
// ticks afterwards.
func TestStopDuringStartJitter(t *testing.T) {
	old := jitterFraction
	t.Cleanup(func() { jitterFraction = old })
	jitterFraction = func() float64 { return 0.5 }
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	a := &app{opts: &options{startJitter: time.Hour}, log: slog.New(slog.DiscardHandler)}
	if a.jitter(ctx) {
		t.Error("a stopped process went on after its start-up jitter")
	}
	if waitToStart(ctx, 0) {
		t.Error("without a jitter, a stopped process went on")
	}
	if !waitToStart(context.Background(), 0) {
		t.Error("without a jitter, a running process did not go on")
	}
}

// --start-jitter is a flag of run only, 0 by default, and not negative.
func TestStartJitterFlag(t *testing.T) {
	for _, tc := range []struct {
		cmd  string
		args []string
		want time.Duration
		err  string
	}{
		{cmd: "run", want: 0},
		{cmd: "run", args: []string{"--start-jitter=30s"}, want: 30 * time.Second},
		{cmd: "run", args: []string{"--start-jitter=-1s"}, err: "--start-jitter must not be negative"},
		{cmd: "sync", args: []string{"--start-jitter=30s"}, err: "flag provided but not defined: -start-jitter"},
	} {
		t.Run(tc.cmd+strings.Join(tc.args, " "), func(t *testing.T) {
			var stderr strings.Builder
			o, err := parseFlags(tc.cmd, append([]string{"--repo=.", "--namespace=ns"}, tc.args...), &stderr)
			switch {
			case tc.err != "":
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
			case err != nil:
				t.Fatal(err)
			case o.startJitter != tc.want:
				t.Errorf("start jitter %v, want %v", o.startJitter, tc.want)
			}
		})
	}
}

// The client limits' defaults leave a first sync of a few thousand objects
// (a dry run and an apply each) to the API server's pace: the burst holds
// a first sync of 1,000 objects, and the rate keeps 3,000 objects' under
// the few seconds the server itself takes (docs/performance.md).
func TestClientLimitDefaults(t *testing.T) {
	o, err := parseFlags("run", []string{"--repo=.", "--namespace=ns"}, &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	if o.kubeBurst < 2*1000 {
		t.Errorf("--kube-api-burst %d: a first sync of 1,000 objects (2,000 requests) waits for the limiter", o.kubeBurst)
	}
	if limited := time.Duration(float64(2*3000-o.kubeBurst) / o.kubeQPS * float64(time.Second)); limited > 5*time.Second {
		t.Errorf("--kube-api-qps %v, --kube-api-burst %d: a first sync of 3,000 objects waits %v for the limiter alone", o.kubeQPS, o.kubeBurst, limited)
	}
}
