package loop

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"recond.dev/recond/reconcile/failure"
)

// Trigger names what asked for a tick. The values are a contract: the tick
// log line, the root span and recond_tick_triggers_total{source} use them.
type Trigger string

// Every trigger of a tick.
const (
	// TriggerInterval: the loop's start, or --interval elapsed.
	TriggerInterval Trigger = "interval"
	// TriggerWatch: a watched object recond owns was changed or deleted by
	// someone else.
	TriggerWatch Trigger = "watch"
	// TriggerManual: a one-off tick (recond sync, recond diff) or a request
	// to POST /api/v1/sync.
	TriggerManual Trigger = "manual"
	// TriggerWebhook: a Git push webhook for the followed ref.
	TriggerWebhook Trigger = "webhook"
	// TriggerHook: a chart's hook that recond started is still running.
	TriggerHook Trigger = "hook"
)

// Triggers lists every Trigger, so that labelled series can be
// pre-initialised.
var Triggers = []Trigger{TriggerInterval, TriggerWatch, TriggerManual, TriggerWebhook, TriggerHook}

// Loop schedules ticks, and runs none itself: a one-slot trigger channel
// that coalesces requests, the debouncers of watch events and of requests
// from outside, the numbering of ticks (with the request spans each one
// serves), the phases of abandoned ticks still running, and the wake-up at
// a suspension's end. Run hands each tick to the engine; the engine's side
// (numbering its ticks, counting abandoned phases) is Ticks. Safe for
// concurrent use.
type Loop struct {
	// triggers holds at most one pending tick request (Trigger).
	triggers chan Trigger
	// seq numbers ticks (Request, Progress); requests debounces Request,
	// debounce TriggerAfter.
	seq      sequence
	requests debouncer
	// burst is TriggerBurst's: the watches' requests for a tick.
	burst    burst
	debounce debouncer
	// strays counts the phases of abandoned ticks that have not returned;
	// strayBack is signalled when one does.
	strays    atomic.Int32
	strayBack chan struct{}
	// newer is signalled by Request: a push or an operator asked for a
	// tick, so a render running now may be of a replaced revision.
	// pollEvery is the loop's interval (Run), at which a long render checks
	// too; 0: only on requests.
	newer     chan struct{}
	pollEvery atomic.Int64
	// wake is the timer of a suspension's end (WakeAt), and its time.
	wakeMu  sync.Mutex
	wakeFor time.Time
	wake    *time.Timer
	log     *slog.Logger
}

// New returns a Loop and its engine's side.
func New(log *slog.Logger) (*Loop, *Ticks) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Loop{triggers: make(chan Trigger, 1), newer: make(chan struct{}, 1), strayBack: make(chan struct{}, 1), log: log}
	return l, &Ticks{l: l}
}

// WakeAt asks for a tick at t (once per t; a later call with another time
// replaces it): a suspension's end is a tick of its own, whatever the
// interval.
func (l *Loop) WakeAt(t time.Time) {
	l.wakeMu.Lock()
	defer l.wakeMu.Unlock()
	if l.wakeFor.Equal(t) {
		return
	}
	if l.wake != nil {
		l.wake.Stop()
	}
	l.wakeFor = t
	// A moment after, so that the tick finds the time passed.
	l.wake = time.AfterFunc(time.Until(t)+100*time.Millisecond, func() { l.Trigger(TriggerInterval) })
}

// RequestDebounce is how long a request from outside (POST /api/v1/sync, a
// webhook) waits for more before it asks for a tick: a burst of pushes (a
// merge train, a tag and its branch) costs one tick.
const RequestDebounce = 200 * time.Millisecond

// Request asks for a tick after RequestDebounce (requests within it join)
// and returns the id of the tick that will serve it: the next tick to start
// (reconcile.Result.ID), which reads Git and the API server after the request. link,
// when valid, is the span of the request (an HTTP handler's): the tick's
// root span links to it. It never blocks.
func (r *Loop) Request(t Trigger, link trace.SpanContext) uint64 {
	r.seq.mu.Lock()
	defer r.seq.mu.Unlock()
	if link.IsValid() && len(r.seq.links) < maxLinks {
		r.seq.links = append(r.seq.links, link)
	}
	r.requests.after(RequestDebounce, func() { r.Trigger(t) })
	select {
	case r.newer <- struct{}{}:
	default:
	}
	return r.seq.started + 1
}

// maxLinks bounds the request spans one tick links to.
const maxLinks = 32

// Progress is where the loop is: the id of the last tick started (0 before
// the first), whether it is still running, and the id of the last one that
// ended.
type Progress struct {
	Started, Finished uint64
	Running           bool
	// StartedAt is when the last tick started (zero before the first).
	StartedAt time.Time
	// Strays is the number of phases of abandoned ticks still running
	// (reconcile.AbandonAfter); at MaxStrays the loop starts no more ticks.
	Strays int
}

// Progress tells where the loop is. Safe for concurrent use.
func (r *Loop) Progress() Progress {
	r.seq.mu.Lock()
	defer r.seq.mu.Unlock()
	return Progress{Started: r.seq.started, Finished: r.seq.finished, Running: r.seq.started > r.seq.finished,
		StartedAt: r.seq.startedAt, Strays: int(r.strays.Load())}
}

// sequence numbers ticks and holds the request spans the next one links to.
type sequence struct {
	mu                sync.Mutex
	started, finished uint64
	startedAt         time.Time
	links             []trace.SpanContext
}

// begin numbers a tick that starts now and hands it the pending links.
func (s *sequence) begin() (uint64, []trace.SpanContext) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started++
	s.startedAt = time.Now()
	links := s.links
	s.links = nil
	return s.started, links
}

func (s *sequence) end(id uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.finished = max(s.finished, id)
}

type linksKey struct{}

// WithLinks is ctx carrying the request spans its tick serves.
func WithLinks(ctx context.Context, links []trace.SpanContext) context.Context {
	if len(links) == 0 {
		return ctx
	}
	return context.WithValue(ctx, linksKey{}, links)
}

// Links returns the request spans the tick whose ctx this is serves (the
// tracing observer links its root span to them).
func Links(ctx context.Context) []trace.SpanContext {
	l, _ := ctx.Value(linksKey{}).([]trace.SpanContext)
	return l
}

// Trigger asks the running loop for a tick as soon as the current one (if
// any) has ended. It never blocks: requests that arrive while one is
// pending are coalesced into it (the first one's source is kept). Safe for
// concurrent use, also before Run starts (the request then waits for it).
func (r *Loop) Trigger(t Trigger) {
	select {
	case r.triggers <- t:
	default: // a tick is already pending
	}
}

// TriggerAfter is Trigger after delay, debounced: calls made while one is
// waiting join it, so a burst of events costs one tick. The delay lets the
// burst's last event arrive (a rollout touches an object several times).
func (r *Loop) TriggerAfter(t Trigger, delay time.Duration) {
	r.debounce.after(delay, func() { r.Trigger(t) })
}

// TriggerBurst asks for a tick at once when none was asked for within the
// last window, and otherwise once at the window's end, for every call
// within it: a single event waits for nothing, and a burst (a rollout
// touching an object several times, kubectl apply of many objects) costs
// two ticks at most.
func (r *Loop) TriggerBurst(t Trigger, window time.Duration) {
	r.burst.call(window, func() { r.Trigger(t) })
}

// burst fires the first call after a quiet window at once, and the calls
// within a window once, at its end.
type burst struct {
	mu    sync.Mutex
	last  time.Time // when it last fired
	timer *time.Timer
	now   func() time.Time
}

func (b *burst) call(window time.Duration, fn func()) {
	b.mu.Lock()
	now := time.Now
	if b.now != nil {
		now = b.now
	}
	t := now()
	switch {
	case b.timer != nil: // joins the pending call
		b.mu.Unlock()
	case t.Sub(b.last) >= window:
		b.last = t
		b.mu.Unlock()
		fn()
	default:
		b.timer = time.AfterFunc(b.last.Add(window).Sub(t), func() {
			b.mu.Lock()
			b.timer, b.last = nil, now()
			b.mu.Unlock()
			fn()
		})
		b.mu.Unlock()
	}
}

// debouncer holds one pending call.
type debouncer struct {
	mu    sync.Mutex
	timer *time.Timer
}

// after calls fn after delay, unless a call is pending already: then this
// one joins it.
func (d *debouncer) after(delay time.Duration, fn func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil {
		return
	}
	d.timer = time.AfterFunc(delay, func() {
		d.mu.Lock()
		d.timer = nil
		d.mu.Unlock()
		fn()
	})
}

// Run ticks at once and then every interval until ctx is cancelled, and
// whenever Trigger is called: tick runs each tick, one at a time. Ticks
// never overlap: triggers that arrive during a tick are coalesced into one
// tick after it. Each tick's context is bounded by timeout (its cause
// failure.ErrTickTimeout). While MaxStrays abandoned phases are still
// running, no tick starts.
func (l *Loop) Run(ctx context.Context, interval, timeout time.Duration, tick func(context.Context, Trigger)) {
	l.pollEvery.Store(int64(interval))
	loop{triggers: l.triggers, tick: tick, ready: l.waitStrays}.run(ctx, interval, timeout)
}

// MaxStrays is how many abandoned phases may still be running before the
// loop starts no more ticks: a process whose phases wedge one after the
// other is then restarted by its liveness probe (/healthz fails when no
// tick started for a while), rather than piling goroutines up.
const MaxStrays = 2

// Ticks is the engine's side of a Loop: it numbers the ticks it runs
// (with the request spans each serves), counts the phases its ticks
// abandoned, and learns when a newer revision may exist.
type Ticks struct{ l *Loop }

// Begin numbers a tick that starts now and hands it the request spans it
// serves; End records that it ended.
func (t *Ticks) Begin() (uint64, []trace.SpanContext) { return t.l.seq.begin() }
func (t *Ticks) End(id uint64)                        { t.l.seq.end(id) }

// Strayed counts a phase its tick abandoned, Unstrayed takes that back (it
// returned just then), StrayReturned counts one that came back later.
func (t *Ticks) Strayed()   { t.l.strays.Add(1) }
func (t *Ticks) Unstrayed() { t.l.strays.Add(-1) }
func (t *Ticks) StrayReturned() {
	t.l.strays.Add(-1)
	select {
	case t.l.strayBack <- struct{}{}:
	default:
	}
}

// NewerRequested is signalled when a tick was asked for from outside (a
// newer revision may exist); PollInterval is how often a long render asks
// Git without one (0: never).
func (t *Ticks) NewerRequested() <-chan struct{} { return t.l.newer }
func (t *Ticks) PollInterval() time.Duration     { return time.Duration(t.l.pollEvery.Load()) }

// waitStrays waits until fewer than MaxStrays abandoned phases are still
// running, or ctx is done (false).
func (r *Loop) waitStrays(ctx context.Context) bool {
	logged := false
	for r.strays.Load() >= MaxStrays {
		if !logged {
			r.log.Error("the loop is wedged: phases of abandoned ticks have not returned; no tick starts until one does (the liveness probe restarts the process)",
				"strays", r.strays.Load())
			logged = true
		}
		select {
		case <-ctx.Done():
			return false
		case <-r.strayBack:
		}
	}
	return true
}

// loop is Run without the Loop: a coalescing one-slot trigger channel, a
// ticker that writes into it, and one tick at a time.
type loop struct {
	triggers chan Trigger
	tick     func(context.Context, Trigger)
	// ready, when set, is waited for before each tick; false stops the loop.
	ready func(context.Context) bool
}

func (l loop) run(ctx context.Context, interval, timeout time.Duration) {
	fire := func(t Trigger) {
		select {
		case l.triggers <- t:
		default: // a tick is already pending
		}
	}
	fire(TriggerInterval)
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				fire(TriggerInterval)
			}
		}
	}()
	for {
		var why Trigger
		select {
		case <-ctx.Done():
			return
		case why = <-l.triggers:
		}
		if ctx.Err() != nil {
			// Both were ready and select picked the trigger.
			return
		}
		if l.ready != nil && !l.ready(ctx) {
			return
		}
		tctx, cancel := context.WithTimeoutCause(ctx, timeout, failure.ErrTickTimeout)
		l.tick(tctx, why)
		cancel()
	}
}
