package status

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"recond.dev/recond/reconcile"
)

// view is what the HTML templates read.
type view struct {
	S        *Status
	Title    string
	CSS      template.CSS
	Refresh  int
	Revision revLink
	Phases   []reconcile.Phase
	// Timeline and ObjectRows are the rows of the two tables of the main
	// page: fragments html/template rendered once, joined with the times
	// relative to the view.
	Timeline   template.HTML
	ObjectRows template.HTML
	Objects    Objects
	R          *record // the tick page's
	// ID and Message are the page of a tick that is not available.
	ID      uint64
	Message string
	now     time.Time
}

// revLink is a revision and, when a template is set, its commit URL.
type revLink struct{ Rev, URL string }

// When is t as a <time> element that says how long ago it was; "never"
// when t is nil.
func (v *view) When(t *time.Time) template.HTML {
	var b strings.Builder
	writeTime(&b, t, v.now)
	return template.HTML(b.String())
}

// writeTime writes t as a <time> element that says how long before now it
// was; "never" when t is nil. Nothing in it needs escaping: an RFC 3339
// time and a relative duration are digits, letters, ':' and '-'.
func writeTime(b *strings.Builder, t *time.Time, now time.Time) {
	if t == nil {
		b.WriteString(`<span class="m">never</span>`)
		return
	}
	b.WriteString(`<time datetime="`)
	b.WriteString(t.UTC().Format(time.RFC3339))
	b.WriteString(`">`)
	if d := now.Sub(*t); d > 0 {
		b.WriteString(relative(d))
		b.WriteString(" ago")
	} else {
		b.WriteString("just now")
	}
	b.WriteString(`</time>`)
}

// timeline writes the rows of the timeline.
func timeline(rows []*record, now time.Time) template.HTML {
	var b strings.Builder
	b.Grow(len(rows) * 800)
	for _, r := range rows {
		b.WriteString(string(r.Head))
		b.WriteString("<td>")
		writeTime(&b, &r.Detail.Start, now)
		b.WriteString("</td>")
		b.WriteString(string(r.Tail))
		b.WriteByte('\n')
	}
	return template.HTML(b.String())
}

// Next says about when t (the next tick) is due.
func (v *view) Next(t *time.Time) template.HTML {
	ts := t.UTC().Format(time.RFC3339)
	when := "due now"
	if d := t.Sub(v.now); d > time.Second {
		when = "in about " + relative(d)
	}
	return template.HTML(`<time datetime="` + ts + `">` + when + `</time>`)
}

// Handler serves the status page: GET / (the header, the timeline and one
// page of the managed objects, ?page=N), GET /ticks/{id} (one tick) and GET
// /api/v1/status (Status as JSON, ?page=N). Links are relative, so it can
// be mounted under a prefix with http.StripPrefix. GET /api/v1/ticks/{id}
// is TicksHandler's.
func (p *Page) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", p.serveIndex)
	mux.HandleFunc("GET /ticks/{id}", p.serveTick)
	mux.HandleFunc("GET /api/v1/status", p.serveStatus)
	return mux
}

// TicksHandler serves GET /api/v1/ticks/{id}: TickState as JSON, so that a
// client that asked for a sync (and got the tick's id) can wait for its
// outcome. It works without the status page.
func (p *Page) TicksHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/ticks/{id}", p.serveTickState)
	return mux
}

// pageParam reads ?page=N (1 when absent).
func pageParam(r *http.Request) (int, error) {
	s := r.URL.Query().Get("page")
	if s == "" {
		return 1, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("page %q: want a number from 1", s)
	}
	return n, nil
}

func (p *Page) serveIndex(w http.ResponseWriter, r *http.Request) {
	n, err := pageParam(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s := p.snapshot()
	st := p.status(s, n)
	v := &view{S: st, Title: fmt.Sprintf("recond %s/%s: status", st.Namespace, st.Instance), CSS: css,
		Revision: revLink{st.Revision, st.RevisionURL}, Phases: reconcile.Phases,
		Timeline: timeline(s.ticks, s.now), Objects: st.Objects, now: s.now}
	if o := st.Objects; s.objects != nil && len(o.Items) > 0 {
		var b strings.Builder
		from := (o.Page - 1) * o.PerPage
		s.objects.rows(&b, from, from+len(o.Items), s.now)
		v.ObjectRows = template.HTML(b.String())
	}
	if p.o.Refresh > 0 {
		v.Refresh = max(1, int(p.o.Refresh.Seconds()))
	}
	p.render(w, http.StatusOK, "index", v)
}

// tickID is the tick id of the request's path, or false when it is not a
// number from 1 and the request was answered 400.
func tickID(w http.ResponseWriter, r *http.Request) (uint64, bool) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil || id == 0 {
		http.Error(w, "tick id: want a number from 1", http.StatusBadRequest)
		return 0, false
	}
	return id, true
}

func (p *Page) serveTick(w http.ResponseWriter, r *http.Request) {
	id, ok := tickID(w, r)
	if !ok {
		return
	}
	rec, prog, _ := p.tick(id)
	st := &Status{Namespace: p.info.Namespace, Instance: p.info.Instance}
	v := &view{S: st, CSS: css, ID: id, now: p.o.Now()}
	if rec == nil {
		v.Title = fmt.Sprintf("recond %s/%s: tick %d", st.Namespace, st.Instance, id)
		code := http.StatusNotFound
		switch state(id, prog, nil) {
		case StatePending:
			v.Message = "This tick has not started yet."
		case StateRunning:
			v.Message, v.Refresh = "This tick is running.", 2
		default:
			v.Message = "This tick ended but is no longer among the ticks kept."
		}
		p.render(w, code, "missing", v)
		return
	}
	t := rec.Detail
	v.Title = fmt.Sprintf("recond %s/%s: tick %d, %s", st.Namespace, st.Instance, id, t.Outcome)
	v.R = rec
	v.Revision = revLink{t.Revision, p.commitURL(t.Revision)}
	p.render(w, http.StatusOK, "tick", v)
}

func (p *Page) serveStatus(w http.ResponseWriter, r *http.Request) {
	n, err := pageParam(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	writeJSON(w, http.StatusOK, p.status(p.snapshot(), n))
}

func (p *Page) serveTickState(w http.ResponseWriter, r *http.Request) {
	id, ok := tickID(w, r)
	if !ok {
		return
	}
	rec, prog, _ := p.tick(id)
	ts := TickState{Schema: SchemaVersion, ID: id, State: state(id, prog, rec)}
	if rec != nil {
		d := rec.Detail
		ts.Tick = &d
	}
	writeJSON(w, http.StatusOK, ts)
}

// state is where tick id is: done when its record is kept, else from the
// loop's progress. Without a progress function (Started 0) a tick not kept
// counts as pending until a newer one ended.
func state(id uint64, prog reconcile.Progress, rec *record) string {
	switch {
	case rec != nil:
		return StateDone
	case id <= prog.Finished:
		return StateExpired
	case prog.Running && id == prog.Started:
		return StateRunning
	}
	return StatePending
}

// buffers are reused across renders: a page is tens of KB.
var buffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// render executes template name into a buffer first, so that a failure
// gives a 500 rather than half a page.
func (p *Page) render(w http.ResponseWriter, code int, name string, v *view) {
	buf := buffers.Get().(*bytes.Buffer)
	buf.Reset()
	defer buffers.Put(buf)
	if err := pages.ExecuteTemplate(buf, name, v); err != nil {
		http.Error(w, "render status page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	page := visibleBidi(buf.Bytes())
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(page)))
	securityHeaders(h)
	w.WriteHeader(code)
	_, _ = w.Write(page)
}

// securityHeaders forbid everything the page does not use: no script, no
// external asset, no framing, no referrer to the commit or trace links.
func securityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encode status: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)+1))
	securityHeaders(h)
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}
