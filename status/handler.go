package status

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"recond.dev/recond/reconcile"
)

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
	v := &view{S: st, Title: fmt.Sprintf("recond %s/%s: status", st.Namespace, st.Instance),
		Revision: revLink{st.Revision, st.RevisionURL}, ticks: s.ticks, objects: s.objects, now: s.now}
	if p.o.Refresh > 0 {
		v.Refresh = max(1, int(p.o.Refresh.Seconds()))
	}
	p.render(w, http.StatusOK, writeIndex, v)
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
	v := &view{S: st, ID: id, now: p.o.Now()}
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
		p.render(w, code, writeMissing, v)
		return
	}
	t := rec.Detail
	v.Title = fmt.Sprintf("recond %s/%s: tick %d, %s", st.Namespace, st.Instance, id, t.Outcome)
	v.R = rec
	v.Revision = revLink{t.Revision, p.commitURL(t.Revision)}
	p.render(w, http.StatusOK, writeTick, v)
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

// render writes v's page into a buffer first, then the buffer whole, with
// its length.
func (p *Page) render(w http.ResponseWriter, code int, page func(hw, *view), v *view) {
	buf := buffers.Get().(*bytes.Buffer)
	buf.Reset()
	defer buffers.Put(buf)
	page(hw{buf}, v)
	out := visibleBidi(buf.Bytes())
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(out)))
	securityHeaders(h)
	w.WriteHeader(code)
	_, _ = w.Write(out)
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
