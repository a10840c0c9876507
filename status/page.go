package status

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"recond.dev/recond/reconcile"
)

// Info is what the page says about the instance in its header.
type Info struct {
	Namespace, Instance string
	// Repo is the repository's display URL; user information in it is
	// dropped all the same.
	Repo, Ref, Path string
	// Observe is the observe mode (list or watch).
	Observe  string
	Interval time.Duration
	// CommitURLTemplate links a revision when set: "{revision}" is replaced
	// by the commit SHA, e.g. https://github.com/org/repo/commit/{revision}.
	CommitURLTemplate string
	// TraceURLTemplate links a tick's trace when set and the tick was
	// sampled: "{trace_id}" is replaced by the trace id, e.g.
	// http://jaeger:16686/trace/{trace_id}.
	TraceURLTemplate string
}

// Options tune a Page.
type Options struct {
	// Size is how many ticks the ring keeps; 0 means 100.
	Size int
	// ObjectsPerPage is how many managed objects one page lists; 0 means
	// 100.
	ObjectsPerPage int
	// Progress tells where the loop is (reconcile.Reconciler.Progress);
	// nil: the page only knows the ticks that ended.
	Progress func() reconcile.Progress
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Refresh is how often the browser reloads the main page (a meta
	// refresh, so it works with JavaScript off); 0 means 30 s, negative
	// never.
	Refresh time.Duration
}

// Page is the status page. It implements reconcile.Observer: each tick's
// end is recorded into a ring of the last Size ticks, from which every view
// is served. Safe for concurrent use.
type Page struct {
	info Info
	o    Options

	mu sync.Mutex
	// ring holds the last ticks; next is where the next one goes, n how
	// many it holds. Records are never changed once in the ring.
	ring []*record
	next int
	n    int
	latest
}

// latest is what the last ticks left beside the ring, copied whole into
// each view's snapshot.
type latest struct {
	// objects are the last health assessment's, replaced as a whole (never
	// changed in place); nil before the first assessment.
	objects          *objectSet
	health           string
	revision         string
	chart            *Chart
	suspension       *reconcile.Suspension
	applied          string
	lastEnd, success time.Time
}

// objectSet is the objects of one health assessment and, rendered as they
// are first viewed, their rows of the objects table (but the last change,
// relative to the view).
type objectSet struct {
	items []Object
	mu    sync.Mutex
	heads []markup // by item; "" until written
}

// rows writes the table rows of items[from:to].
func (o *objectSet) rows(h hw, from, to int, now time.Time) {
	o.mu.Lock()
	if o.heads == nil {
		o.heads = make([]markup, len(o.items))
	}
	heads := o.heads[from:to]
	for i := range heads {
		if heads[i] == "" {
			heads[i] = objectHead(&o.items[from+i])
		}
	}
	o.mu.Unlock()
	for i, head := range heads {
		h.m(head)
		h.m("<td>")
		writeTime(h, o.items[from+i].Changed, now)
		h.m("</td></tr>\n")
	}
}

// New returns a Page for the instance info describes.
func New(info Info, o Options) *Page {
	if o.Size <= 0 {
		o.Size = 100
	}
	if o.ObjectsPerPage <= 0 {
		o.ObjectsPerPage = 100
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Refresh == 0 {
		o.Refresh = 30 * time.Second
	}
	info.Repo = displayURL(info.Repo)
	return &Page{info: info, o: o, ring: make([]*record, o.Size)}
}

// displayURL drops user information (a token in https://user:token@host),
// the query and the fragment (a token in ?private_token=...) from a
// repository URL. The source's display URL has none of them already; the
// page does not rely on it alone.
func displayURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		if !strings.Contains(s, "://") {
			return s
		}
		// Unparsable: keep scheme, host and path, without user
		// information, query or fragment.
		scheme, rest, _ := strings.Cut(s, "://")
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			rest = rest[at+1:]
		}
		if i := strings.IndexAny(rest, "?#"); i >= 0 {
			rest = rest[:i]
		}
		return scheme + "://" + rest
	}
	if u.Scheme == "" || u.Opaque != "" {
		return s // a local path or scp-like address
	}
	u.User = nil
	u.RawQuery, u.Fragment, u.RawFragment, u.ForceQuery = "", "", "", false
	return u.String()
}

var _ reconcile.Observer = (*Page)(nil)

// TickStart implements reconcile.Observer.
func (p *Page) TickStart(ctx context.Context) context.Context { return ctx }

// PhaseStart implements reconcile.Observer.
func (p *Page) PhaseStart(ctx context.Context, _ reconcile.Phase) context.Context { return ctx }

// PhaseEnd implements reconcile.Observer.
func (p *Page) PhaseEnd(context.Context, reconcile.PhaseResult, *reconcile.Result) {}

// TickEnd records r (with the trace id of ctx's span when it is sampled).
// The record is built before the lock is taken: a view never waits for the
// compaction of a large tick.
func (p *Page) TickEnd(ctx context.Context, r *reconcile.Result) {
	rec := newRecord(r, traceIDOf(trace.SpanContextFromContext(ctx)), p.info.TraceURLTemplate)
	var objects []Object
	if r.Health != nil {
		objects = objectsOf(r.Health)
	}
	end := r.Start.Add(r.Duration)

	p.mu.Lock()
	defer p.mu.Unlock()
	p.ring[p.next] = rec
	p.next = (p.next + 1) % len(p.ring)
	p.n = min(p.n+1, len(p.ring))
	if r.Health != nil {
		p.objects, p.health = &objectSet{items: objects}, string(r.Health.Status)
	}
	if r.Revision != "" {
		p.revision = r.Revision
		p.chart = nil
		if c := r.Chart; c != nil {
			p.chart = &Chart{Name: c.Name, Version: c.Version, Values: c.Values}
		}
	}
	p.suspension = r.Suspension
	if r.Failure() == nil {
		p.success = end
		if r.Revision != "" && !r.DryRun && r.Outcome != reconcile.OutcomeOutOfSync {
			p.applied = r.Revision
		}
	}
	p.lastEnd = end
}

// snapshot is what one view reads, copied under the lock.
type snapshot struct {
	latest
	ticks    []*record // newest first
	progress reconcile.Progress
	now      time.Time
}

func (p *Page) snapshot() snapshot {
	var prog reconcile.Progress
	if p.o.Progress != nil {
		prog = p.o.Progress()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	s := snapshot{latest: p.latest, ticks: make([]*record, 0, p.n), progress: prog}
	for i := 1; i <= p.n; i++ {
		s.ticks = append(s.ticks, p.ring[(p.next-i+len(p.ring))%len(p.ring)])
	}
	if p.o.Progress == nil && len(s.ticks) > 0 {
		id := s.ticks[0].Detail.ID
		s.progress = reconcile.Progress{Started: id, Finished: id}
	}
	s.now = p.o.Now()
	return s
}

// tick returns the record of tick id and where the loop is.
func (p *Page) tick(id uint64) (*record, reconcile.Progress, uint64) {
	var prog reconcile.Progress
	if p.o.Progress != nil {
		prog = p.o.Progress()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var newest uint64
	for i := 1; i <= p.n; i++ {
		rec := p.ring[(p.next-i+len(p.ring))%len(p.ring)]
		newest = max(newest, rec.Detail.ID)
		if rec.Detail.ID == id {
			return rec, prog, newest
		}
	}
	return nil, prog, newest
}

// commitURL links a revision through the commit URL template; "" when
// there is no template or no revision.
func (p *Page) commitURL(rev string) string {
	if p.info.CommitURLTemplate == "" || rev == "" {
		return ""
	}
	return strings.ReplaceAll(p.info.CommitURLTemplate, "{revision}", url.PathEscape(rev))
}

// status builds the JSON view of s with objects page page (clamped).
func (p *Page) status(s snapshot, page int) *Status {
	st := &Status{
		Schema: SchemaVersion, Generated: s.now.UTC(),
		Namespace: p.info.Namespace, Instance: p.info.Instance, Repo: p.info.Repo, Ref: p.info.Ref,
		Path: p.info.Path, Observe: p.info.Observe, IntervalSeconds: p.info.Interval.Seconds(), Chart: s.chart,
		Revision: s.revision, RevisionURL: p.commitURL(s.revision), AppliedRevision: s.applied,
		Health:   s.health,
		Progress: Progress{Started: s.progress.Started, Finished: s.progress.Finished, Running: s.progress.Running},
		Ticks:    make([]Tick, 0, len(s.ticks)),
		Objects:  p.objectPage(s.objects.list(), page),
	}
	if sus := s.suspension; sus.Active(s.now) {
		st.Suspension = &Suspension{Until: sus.Until.UTC(), RemainingSeconds: sus.Until.Sub(s.now).Round(time.Second).Seconds(),
			Reason: sus.Reason, By: sus.By}
	}
	if !s.lastEnd.IsZero() {
		last := s.lastEnd.UTC()
		st.LastTick = &last
		if p.info.Interval > 0 {
			next := last.Add(p.info.Interval)
			st.NextTick = &next
		}
	}
	if !s.success.IsZero() {
		ok := s.success.UTC()
		st.LastSuccess = &ok
	}
	for _, r := range s.ticks {
		st.Ticks = append(st.Ticks, r.Detail.Tick)
	}
	return st
}

// list is the objects, none for a nil set.
func (o *objectSet) list() []Object {
	if o == nil {
		return nil
	}
	return o.items
}

// objectPage is page n (from 1, clamped to the pages there are) of objs.
func (p *Page) objectPage(objs []Object, n int) Objects {
	per := p.o.ObjectsPerPage
	pages := max(1, (len(objs)+per-1)/per)
	n = min(max(n, 1), pages)
	from := (n - 1) * per
	to := min(from+per, len(objs))
	items := objs[from:to:to]
	if items == nil {
		items = []Object{}
	}
	return Objects{Page: n, PerPage: per, Pages: pages, Total: len(objs), Items: items}
}
