package reconcile

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"recond.dev/recond/reconcile/diff"
)

// inWave runs at most ApplyConcurrency calls at once, every one of them
// when nothing fails, and returns each result at its change's index.
//
// The calls wait until want of them run at once (a barrier, not a sleep
// that a busy machine may let end before the others start), then overlap
// a little more: a bound too high shows as a peak above want.
func TestInWaveBoundsConcurrency(t *testing.T) {
	for _, tc := range []struct{ concurrency, want int }{{0, 1}, {-3, 1}, {1, 1}, {4, 4}, {8, 8}} {
		t.Run(fmt.Sprint(tc.concurrency), func(t *testing.T) {
			r := &Reconciler{cfg: Config{ApplyConcurrency: tc.concurrency}}
			st := newTestState(context.Background())
			changes := numbered(40)
			var now, peak atomic.Int32
			reached := make(chan struct{})
			var once sync.Once
			results, err := (&tick{r: r, st: st}).inWave(context.Background(), changes, func(_ context.Context, c diff.Change) outcome {
				n := now.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				if int(n) >= tc.want {
					once.Do(func() { close(reached) })
				}
				select {
				case <-reached:
				case <-time.After(guard): // a guard against a hang: the peak below tells
				}
				time.Sleep(2 * time.Millisecond)
				now.Add(-1)
				return outcome{}
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := int(peak.Load()); got != tc.want {
				t.Errorf("peak concurrency %d, want %d", got, tc.want)
			}
			for i, o := range results {
				if !o.ran {
					t.Errorf("change %d never ran", i)
				}
			}
		})
	}
}

// After a failed call no further call starts; the calls in flight finish
// and are reported; the error is the first failure in the changes' order.
func TestInWaveStopsLaunchingAfterAFailure(t *testing.T) {
	r := &Reconciler{cfg: Config{ApplyConcurrency: 4}}
	st := newTestState(context.Background())
	changes := numbered(40)
	var mu sync.Mutex
	started := map[string]bool{}
	results, err := (&tick{r: r, st: st}).inWave(context.Background(), changes, func(_ context.Context, c diff.Change) outcome {
		mu.Lock()
		started[c.Name] = true
		mu.Unlock()
		switch c.Name {
		case "05":
			time.Sleep(20 * time.Millisecond) // fails last, but first in order
			return outcome{err: errors.New("five")}
		case "06":
			return outcome{err: errors.New("six")}
		}
		time.Sleep(time.Millisecond)
		return outcome{}
	})
	if err == nil || err.Error() != "five" {
		t.Errorf("error %v, want the first failure in order (five)", err)
	}
	if len(started) > 12 {
		t.Errorf("%d calls started; after a failure at most the ones in flight may finish", len(started))
	}
	for i, o := range results {
		if o.ran != started[changes[i].Name] {
			t.Errorf("change %s: ran %v, started %v", changes[i].Name, o.ran, started[changes[i].Name])
		}
	}
	if !results[5].ran || results[5].err == nil {
		t.Errorf("the failure of 05 was not reported: %+v", results[5])
	}
}

// A stop (the loop's, or the tick's deadline) lets the calls in flight
// finish and starts no other.
func TestInWaveStopLetsInFlightFinish(t *testing.T) {
	r := &Reconciler{cfg: Config{ApplyConcurrency: 3}}
	ctx, stop := context.WithCancel(context.Background())
	st := newTestState(ctx)
	var done atomic.Int32
	results, err := (&tick{r: r, st: st}).inWave(context.Background(), numbered(30), func(_ context.Context, c diff.Change) outcome {
		if c.Name == "00" {
			stop()
		}
		time.Sleep(5 * time.Millisecond)
		done.Add(1)
		return outcome{}
	})
	if !errors.Is(err, errStopped) {
		t.Fatalf("error %v, want a stop", err)
	}
	ran := 0
	for _, o := range results {
		if o.ran {
			ran++
			if o.err != nil {
				t.Errorf("a call in flight was cut short: %v", o.err)
			}
		}
	}
	if ran == 0 || ran > 3 || int(done.Load()) != ran {
		t.Errorf("%d calls ran, %d finished; want the (at most 3) in flight at the stop, all finished", ran, done.Load())
	}
}

// A panic in a call is an error of that call, not a crash.
func TestInWavePanicIsAnError(t *testing.T) {
	r := &Reconciler{cfg: Config{ApplyConcurrency: 2}}
	_, err := (&tick{r: r, st: newTestState(context.Background())}).inWave(context.Background(), numbered(3), func(_ context.Context, c diff.Change) outcome {
		if c.Name == "01" {
			panic("boom")
		}
		return outcome{}
	})
	if err == nil || !strings.Contains(err.Error(), "panic: boom") {
		t.Errorf("error %v, want the panic", err)
	}
}

func newTestState(ctx context.Context) *State {
	return &State{ctx: ctx, stop: ctx.Done()}
}

func numbered(n int) []diff.Change {
	cs := make([]diff.Change, n)
	for i := range cs {
		cs[i] = diff.Change{Kind: "ConfigMap", Name: fmt.Sprintf("%02d", i), Action: diff.Create}
	}
	return cs
}
