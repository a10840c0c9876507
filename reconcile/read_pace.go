package reconcile

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"recond.dev/recond/reconcile/source"
)

// fetchPace is the last revision a tick fetched, when, and whether the
// source had moved then (memory.pace).
type fetchPace struct {
	rev   source.Revision
	at    time.Time
	moved bool
}

// paced returns the revision a tick that why asked for reuses instead of
// fetching: one asked for by a watch event or a running hook, within the
// loop's interval of a fetch that found the source moved. Any other tick
// fetches: the interval's, one asked for by hand or by a webhook, a
// suspension's end, and any after a fetch that failed or found the source
// where it was.
func (m *memory) paced(why Trigger, interval time.Duration) (source.Revision, bool) {
	if interval <= 0 || (why != TriggerWatch && why != TriggerHook) {
		return source.Revision{}, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	p := &m.pace
	if !p.moved || time.Since(p.at) >= interval {
		return source.Revision{}, false
	}
	rev := p.rev
	rev.Fetched = false
	return rev, true
}

// fetched records a fetch that started at and found rev (or failed).
func (m *memory) fetched(rev source.Revision, err error, at time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := &m.pace
	if err != nil {
		p.moved = false // the next tick fetches
		return
	}
	p.moved = p.rev.SHA != "" && p.rev.SHA != rev.SHA
	p.rev, p.at = rev, at
}

// fetch is the read phase's Fetch, paced by the interval: a source that
// moved is fetched again at most once per --interval, unless a tick is
// asked for by hand, by a webhook or by the interval itself. Without it, a
// source that moves at every look (a tag flapping between two digests)
// changes the revision at every tick a watch event asks for, and the
// changes of each revision ask for the next tick. A tick that reuses the
// revision still heals drift against it. A render stopped because the ref
// moved (st.Superseded) always fetches the newer revision.
func (t *tick) fetch(ctx context.Context) (source.Revision, error) {
	r, st := t.r, t.st
	if st.Superseded == 0 {
		if rev, ok := r.mem.paced(st.trigger, r.ticks.PollInterval()); ok {
			trace.SpanFromContext(ctx).SetAttributes(attribute.Bool("recond.fetch.paced", true))
			return rev, nil
		}
	}
	start := time.Now()
	rev, err := r.src.Fetch(ctx)
	r.mem.fetched(rev, err, start)
	return rev, err
}
