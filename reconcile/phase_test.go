package reconcile

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"recond.dev/recond/reconcile/source"
)

// TestAsidePhaseDoesNotFailTheTick: a phase run aside (health) that panics
// is recorded as failed (reason other: counted, spanned, logged) but is not
// the tick's failure; the same panic in any other phase is.
func TestAsidePhaseDoesNotFailTheTick(t *testing.T) {
	boom := func(*tick, context.Context) error { panic("boom") }
	for _, aside := range []bool{true, false} {
		r := New(Config{}, nil, nil, nil)
		res := &Result{}
		if ok, _ := (&tick{r: r, st: &State{}}).runPhase(context.Background(), phase{p: PhaseHealth, fn: boom, aside: aside}, res); ok {
			t.Fatalf("aside=%v: a panicking phase succeeded", aside)
		}
		if len(res.Phases) != 1 || res.Phases[0].Err == nil || res.Phases[0].Err.Reason != ReasonOther {
			t.Fatalf("aside=%v: phase results %+v, want one failed with reason other", aside, res.Phases)
		}
		if !res.Phases[0].Panicked || !IsPanic(res.Phases[0].Err) {
			t.Errorf("aside=%v: the panic is not marked: %+v", aside, res.Phases[0])
		}
		if failed := res.Failure() != nil; failed == aside {
			t.Errorf("aside=%v: tick failure %v", aside, res.Failure())
		}
	}
}

// wedge is a Source whose Fetch ignores its context: it returns only when
// released (a read stuck in a syscall, a client without a deadline). Its
// first blocks calls block; every call then fails with errNoRepo.
type wedge struct {
	mu      sync.Mutex
	blocks  int
	calls   int
	release chan struct{}
}

var errNoRepo = errors.New("no repository")

func (w *wedge) Fetch(context.Context) (source.Revision, error) {
	w.mu.Lock()
	w.calls++
	block, release := w.calls <= w.blocks, w.release
	w.mu.Unlock()
	if block {
		<-release
	}
	return source.Revision{}, errNoRepo
}

func (w *wedge) Render(context.Context, string) ([]source.Manifest, error) { return nil, errNoRepo }
func (w *wedge) DisplayURL() string                                        { return "wedge" }

// unblock makes later calls return at once and releases the blocked ones.
func (w *wedge) unblock() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.blocks = 0
	select {
	case <-w.release:
	default:
		close(w.release)
	}
}

// wedgedLoop runs a Reconciler reading from w in a loop (interval 100 ms,
// tick timeout 1 s, abandoned 100 ms after) until the test ends, and
// returns the results as they come. The tick timeout is far above what a
// tick that is not wedged costs (it returns at once), so a loaded machine
// does not time one out.
func wedgedLoop(t *testing.T, w *wedge) (*Reconciler, <-chan *Result) {
	r, results, _ := wedgedLoopStop(t, w)
	return r, results
}

// wedgedLoopStop is wedgedLoop that also returns how to stop the loop (it
// cancels the loop's context and reports whether Run returned, with the
// wedged phases still wedged, within a guard against a hang).
func wedgedLoopStop(t *testing.T, w *wedge) (*Reconciler, <-chan *Result, func() bool) {
	r := New(Config{}, w, nil, nil)
	r.abandonAfter = 100 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	results := make(chan *Result, 100)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		r.Run(ctx, 100*time.Millisecond, wedgedTickTimeout, func(res *Result) { results <- res })
	}()
	t.Cleanup(func() {
		cancel()
		w.unblock()
		<-stopped
	})
	stop := func() bool {
		cancel()
		select {
		case <-stopped:
			return true
		case <-time.After(guard):
			return false
		}
	}
	return r, results, stop
}

// wedgedTickTimeout is the tick timeout of wedgedLoop.
const wedgedTickTimeout = time.Second

// guard is how long a wait of these tests gives up after: a guard against
// a hang, far longer than anything waited for takes.
const guard = 30 * time.Second

func next(t *testing.T, results <-chan *Result) *Result {
	t.Helper()
	select {
	case res := <-results:
		return res
	case <-time.After(guard):
		t.Fatalf("no tick ended within %s", guard)
		return nil
	}
}

// TestWedgedPhaseIsAbandoned: a phase that ignores its deadline is abandoned
// AbandonAfter past it; the tick fails in that phase with reason timeout and
// is marked Abandoned (recond_loop_stalls_total), and the next tick starts
// and succeeds. Without the abandonment the loop waits for the wedged phase
// forever and no second tick ends.
func TestWedgedPhaseIsAbandoned(t *testing.T) {
	w := &wedge{blocks: 1, release: make(chan struct{})}
	r, results := wedgedLoop(t, w)
	first := next(t, results)
	f := first.Failure()
	if f == nil || f.Phase != PhaseRead || f.Reason != ReasonTimeout || !errors.Is(f, errAbandoned) {
		t.Fatalf("first tick failure = %v, want read abandoned with reason timeout", f)
	}
	if !first.Phases[0].Abandoned {
		t.Errorf("first tick's read is not marked abandoned: %+v", first.Phases[0])
	}
	second := next(t, results)
	if f := second.Failure(); f == nil || !errors.Is(f, errNoRepo) || second.Phases[0].Abandoned || second.ID != first.ID+1 {
		t.Fatalf("second tick = %d, %v; want %d to fail on its own (the source's error)", second.ID, f, first.ID+1)
	}
	if p := r.Progress(); p.Strays != 1 {
		t.Errorf("strays = %d while the first read is wedged, want 1", p.Strays)
	}
}

// TestWedgedLoopStartsNoMoreTicks: when every read wedges, the loop
// abandons maxStrays of them and then starts no tick until one returns (so
// /healthz, which watches when the last tick started, fails); released, it
// goes on. Without the bound it would start a tick, and leave a goroutine,
// at every interval.
func TestWedgedLoopStartsNoMoreTicks(t *testing.T) {
	w := &wedge{blocks: 1 << 30, release: make(chan struct{})}
	r, results := wedgedLoop(t, w)
	for range maxStrays {
		if res := next(t, results); !res.Phases[0].Abandoned {
			t.Fatalf("tick %d: %+v, want its read abandoned", res.ID, res.Phases)
		}
	}
	// Ten intervals without a tick.
	time.Sleep(time.Second)
	p := r.Progress()
	if p.Started != maxStrays || p.Strays != maxStrays {
		t.Fatalf("after the strays: %+v, want %d ticks started and %d strays", p, maxStrays, maxStrays)
	}
	select {
	case res := <-results:
		t.Fatalf("tick %d ended while the loop should be waiting", res.ID)
	default:
	}
	w.unblock()
	if res := next(t, results); res.Phases[0].Abandoned || !errors.Is(res.Failure(), errNoRepo) {
		t.Fatalf("tick after the strays returned: %+v, want it to end on its own", res.Phases)
	}
	// The next tick may start as soon as the first stray returned.
	deadline := time.Now().Add(guard)
	for r.Progress().Strays != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("strays %s after release = %d, want 0", guard, r.Progress().Strays)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestWedgedLoopStillStops: a loop that waits for its strays still returns
// when it is stopped (SIGTERM), with the wedged phases still wedged.
func TestWedgedLoopStillStops(t *testing.T) {
	w := &wedge{blocks: 1 << 30, release: make(chan struct{})}
	_, results, stop := wedgedLoopStop(t, w)
	for range maxStrays {
		next(t, results)
	}
	if !stop() {
		t.Fatalf("Run did not return within %s of its context's cancel while waiting for strays", guard)
	}
}

// TestWritePanicIsNotThePhasesPanic: a phase that returns the error of one
// write's recovered panic (apply does) has not panicked itself, so the panic
// is counted once, from the write (Operation.Err), not also from the phase.
func TestWritePanicIsNotThePhasesPanic(t *testing.T) {
	r := New(Config{}, nil, nil, nil)
	res := &Result{}
	write := fmt.Errorf("ConfigMap/a: %w: boom", errPanic)
	fn := func(*tick, context.Context) error { return fmt.Errorf("apply: %w", write) }
	(&tick{r: r, st: &State{}}).runPhase(context.Background(), phase{p: PhaseApply, fn: fn}, res)
	if pr := res.Phases[0]; pr.Panicked || !IsPanic(pr.Err) {
		t.Errorf("phase result %+v: want Panicked false and the error still a panic", pr)
	}
}
