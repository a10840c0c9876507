package loop

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// fakeTicks is a tick function that records what asked for each tick, can
// be held inside a tick, and notices overlapping ticks.
type fakeTicks struct {
	mu      sync.Mutex
	why     []Trigger
	running atomic.Int32
	overlap atomic.Bool
	started chan Trigger
	release chan struct{} // nil: ticks return at once
}

func newFakeTicks(hold bool) *fakeTicks {
	f := &fakeTicks{started: make(chan Trigger, 100)}
	if hold {
		f.release = make(chan struct{})
	}
	return f
}

func (f *fakeTicks) tick(ctx context.Context, t Trigger) {
	if f.running.Add(1) > 1 {
		f.overlap.Store(true)
	}
	defer f.running.Add(-1)
	f.mu.Lock()
	f.why = append(f.why, t)
	f.mu.Unlock()
	f.started <- t
	if f.release != nil {
		select {
		case <-f.release:
		case <-ctx.Done():
		}
	}
}

func (f *fakeTicks) triggers() []Trigger {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Trigger(nil), f.why...)
}

func waitStarted(t *testing.T, f *fakeTicks) Trigger {
	t.Helper()
	select {
	case why := <-f.started:
		return why
	case <-time.After(guard):
		t.Fatal("no tick started")
		return ""
	}
}

// noTick fails if a tick starts within the given time: a check that a
// busy machine can only make pass more easily, never fail.
func noTick(t *testing.T, f *fakeTicks, within time.Duration) {
	t.Helper()
	select {
	case why := <-f.started:
		t.Fatalf("unexpected tick (%s)", why)
	case <-time.After(within):
	}
}

func startLoop(t *testing.T, f *fakeTicks, triggers chan Trigger, interval time.Duration) (cancel func(), done <-chan struct{}) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	d := make(chan struct{})
	go func() {
		loop{triggers: triggers, tick: f.tick}.run(ctx, interval, time.Minute)
		close(d)
	}()
	t.Cleanup(func() {
		stop()
		<-d
	})
	return stop, d
}

// The loop ticks at once (interval), then for each trigger; triggers that
// arrive during a tick are coalesced into one tick after it, carrying the
// first request's source; ticks never overlap.
func TestLoopCoalescesTriggersDuringATick(t *testing.T) {
	f := newFakeTicks(true)
	r, _ := New(nil)
	startLoop(t, f, r.triggers, time.Hour)
	if why := waitStarted(t, f); why != TriggerInterval {
		t.Fatalf("first tick asked by %s, want interval", why)
	}
	for range 50 {
		r.Trigger(TriggerWatch)
		r.Trigger(TriggerManual)
	}
	noTick(t, f, 100*time.Millisecond) // the first tick is still running
	f.release <- struct{}{}
	if why := waitStarted(t, f); why != TriggerWatch {
		t.Fatalf("second tick asked by %s, want watch (the first pending request)", why)
	}
	f.release <- struct{}{}
	noTick(t, f, 200*time.Millisecond) // 100 triggers, one tick
	if f.overlap.Load() {
		t.Error("ticks overlapped")
	}
	if got := f.triggers(); len(got) != 2 {
		t.Errorf("ticks %v, want 2", got)
	}
}

// Trigger never blocks, whether or not the loop runs, and a request made
// before Run starts is served by it.
func TestTriggerNeverBlocks(t *testing.T) {
	r, _ := New(nil)
	done := make(chan struct{})
	go func() {
		for range 1000 {
			r.Trigger(TriggerWatch)
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(guard):
		t.Fatal("Trigger blocked with no loop running")
	}
	f := newFakeTicks(false)
	startLoop(t, f, r.triggers, time.Hour)
	// The pending watch request and the start's interval request coalesce.
	why := waitStarted(t, f)
	if why != TriggerWatch && why != TriggerInterval {
		t.Fatalf("tick asked by %q", why)
	}
	noTick(t, f, 200*time.Millisecond)
}

// The interval ticker fires ticks by itself.
func TestLoopTicksEveryInterval(t *testing.T) {
	f := newFakeTicks(false)
	startLoop(t, f, make(chan Trigger, 1), 50*time.Millisecond)
	for range 3 {
		if why := waitStarted(t, f); why != TriggerInterval {
			t.Fatalf("tick asked by %s, want interval", why)
		}
	}
}

// Cancelling the loop ends the running tick's context and Run returns; no
// tick starts after the cancel, even with a request pending.
func TestLoopStopsOnCancel(t *testing.T) {
	f := newFakeTicks(true)
	r, _ := New(nil)
	cancel, done := startLoop(t, f, r.triggers, time.Hour)
	waitStarted(t, f)
	r.Trigger(TriggerWatch) // pending behind the running tick
	cancel()
	select {
	case <-done:
	case <-time.After(guard):
		t.Fatal("Run did not return after cancel")
	}
	noTick(t, f, 100*time.Millisecond)
}

// TriggerAfter debounces a burst into one request after the delay.
func TestTriggerAfterDebounces(t *testing.T) {
	r, _ := New(nil)
	// A delay far longer than the burst takes, however busy the machine:
	// the burst is one.
	const delay = 500 * time.Millisecond
	start := time.Now()
	for range 20 {
		r.TriggerAfter(TriggerWatch, delay)
	}
	burst := time.Since(start)
	select {
	case why := <-r.triggers:
		if why != TriggerWatch {
			t.Fatalf("trigger %s", why)
		}
		if d := time.Since(start); d < delay {
			t.Errorf("fired after %s, before the delay", d)
		}
	case <-time.After(guard):
		t.Fatal("the debounced trigger never fired")
	}
	select {
	case why := <-r.triggers:
		if burst < delay { // else the calls were two bursts, not one
			t.Fatalf("a second trigger (%s) from one burst", why)
		}
	case <-time.After(150 * time.Millisecond):
	}
	// A later burst fires again.
	r.TriggerAfter(TriggerWatch, 10*time.Millisecond)
	select {
	case <-r.triggers:
	case <-time.After(guard):
		t.Fatal("a second burst never fired")
	}
}

// TestBurstFiresAtOnceThenOnce: after a quiet window a call fires at
// once (before it returns); the calls within the window fire once more,
// at its end; a call after the window fires at once again. The clock is
// the test's, so a busy machine cannot split or join the calls.
func TestBurstFiresAtOnceThenOnce(t *testing.T) {
	clock := time.Unix(1_700_000_000, 0)
	var mu sync.Mutex
	b := &burst{now: func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }}
	advance := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }
	fired := make(chan int, 100)
	n := 0
	call := func() {
		b.call(100*time.Millisecond, func() { n++; fired <- n })
	}
	call()
	select {
	case <-fired:
	default:
		t.Fatal("the first call after a quiet window did not fire at once")
	}
	for range 20 { // a burst within the window
		advance(time.Millisecond)
		call()
	}
	select {
	case got := <-fired:
		if got != 2 {
			t.Fatalf("fire %d", got)
		}
	case <-time.After(guard):
		t.Fatal("the burst's calls never fired")
	}
	select {
	case <-fired:
		t.Fatal("a burst fired more than once after its first call")
	case <-time.After(300 * time.Millisecond):
	}
	advance(time.Second)
	call()
	select {
	case <-fired:
	default:
		t.Fatal("a call after a quiet window did not fire at once")
	}
}

// TestRequestNamesTheTickThatServesIt: a request is answered with the id of
// the next tick to start, which carries the request's span as a link; a burst
// of requests within RequestDebounce asks for one tick.
func TestRequestNamesTheTickThatServesIt(t *testing.T) {
	r, _ := New(nil)
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	span := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid})
	for i := range 20 {
		if id := r.Request(TriggerWebhook, span); id != 1 {
			t.Fatalf("request %d before any tick: id %d, want 1", i, id)
		}
	}
	select {
	case got := <-r.triggers:
		t.Fatalf("a request asked for a tick at once (%s), not after the debounce", got)
	default:
	}
	select {
	case got := <-r.triggers:
		if got != TriggerWebhook {
			t.Errorf("trigger %s, want webhook", got)
		}
	case <-time.After(guard):
		t.Fatal("20 requests asked for no tick")
	}
	select {
	case <-r.triggers:
		t.Fatal("20 requests asked for more than one tick")
	default:
	}
	id, links := r.seq.begin()
	if id != 1 || len(links) != 20 || !links[0].Equal(span) {
		t.Errorf("tick %d with %d links, want tick 1 linked to the requests", id, len(links))
	}
	if p := r.Progress(); p.Started != 1 || !p.Running || p.Finished != 0 {
		t.Errorf("progress during tick 1: %+v", p)
	}
	if got := r.Request(TriggerManual, trace.SpanContext{}); got != 2 {
		t.Errorf("a request during tick 1: id %d, want 2 (tick 1 read Git before it)", got)
	}
	r.seq.end(id)
	if p := r.Progress(); p.Running || p.Finished != 1 {
		t.Errorf("progress after tick 1: %+v", p)
	}
	if _, links := r.seq.begin(); len(links) != 0 {
		t.Errorf("tick 2 has %d links; the manual request had no span", len(links))
	}
}

// guard is how long a wait of these tests gives up after: a guard against
// a hang, far longer than anything waited for takes.
const guard = 30 * time.Second
