package apiproxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"recond.dev/recond/internal/testenv/kubeconfig"
	"recond.dev/recond/internal/testenv/tinyca"
	"recond.dev/recond/internal/testenv/tools"
)

// Proxy is a TLS reverse proxy in front of a kube-apiserver that injects
// faults: delays, error answers, held requests, refused connections, cut,
// stalled and expired watches. A request without an Authorization header is
// forwarded as the admin of the proxied rest.Config (its client
// certificate); one with its own header (a ServiceAccount token) is
// forwarded with that header only, so RBAC applies to that identity.
type Proxy struct {
	// URL is the proxy's https://127.0.0.1:PORT.
	URL string

	t      testing.TB
	caPEM  []byte
	srv    *http.Server
	tlsCfg *tls.Config
	addr   string
	admin  http.RoundTripper // authenticates as the admin
	anon   http.RoundTripper // trusts the server's CA, sends no credentials
	target *url.URL

	mu      sync.Mutex
	ln      net.Listener
	down    bool
	conns   map[net.Conn]struct{}
	faults  []*Fault
	watches map[*watchBody]struct{}
	total   int
	seen    func(*http.Request)
}

// Match selects the requests a Fault applies to. Zero fields match
// everything.
type Match struct {
	// Method is the HTTP method ("GET", "PATCH", ...); "" for any.
	Method string
	// Path is a substring of the URL path, e.g. "/configmaps"; "" for any.
	Path string
	// Query is a substring of the raw query, e.g. "sendInitialEvents=true";
	// "" for any.
	Query string
	// Watch selects watch requests (WatchOnly) or all but them (NoWatch).
	Watch WatchMatch
}

// WatchMatch tells whether a Match selects watch requests.
type WatchMatch int

// The values of WatchMatch.
const (
	AnyRequest WatchMatch = iota
	WatchOnly
	NoWatch
)

// Fault is one programmed fault: what it matches and what it does. Set one
// action (Delay may be combined with the others); a Fault with none only
// counts the requests it matches.
type Fault struct {
	Match Match
	// Times limits the fault to the first Times matching requests; 0 means
	// every one.
	Times int

	// Delay is added before the request is forwarded (or answered).
	Delay time.Duration
	// Status answers the request with this code (429, 500, 503, ...)
	// instead of forwarding it, with a metav1.Status body.
	Status int
	// RetryAfter is sent as Retry-After (seconds) with Status.
	RetryAfter int
	// Hold keeps a matching request waiting until the channel is closed (or
	// the client gives up), then forwards it.
	Hold chan struct{}
	// Stall keeps matching watch streams open but forwards no event and no
	// bookmark while the fault is on; it also applies to streams already
	// open.
	Stall bool
	// Expire answers a matching watch (and ends those already open) with an
	// ERROR event carrying 410 Expired.
	Expire bool
	// Drop loses the events of matching watch streams, as Stall does, but
	// lets their bookmarks through: a stream that looks alive while it
	// delivers nothing (Hits counts the events lost).
	Drop bool

	p    *Proxy
	hits int
}

// Hits is how many requests (or, for Stall, events) the fault matched.
func (f *Fault) Hits() int {
	f.p.mu.Lock()
	defer f.p.mu.Unlock()
	return f.hits
}

// WaitHits waits up to timeout until the fault matched at least n requests,
// and fails the test otherwise.
func (f *Fault) WaitHits(t testing.TB, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for f.Hits() < n {
		if time.Now().After(deadline) {
			t.Fatalf("fault %+v: %d hit(s) after %s, want %d", f.Match, f.Hits(), timeout, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Remove turns the fault off. Stalled streams resume forwarding.
func (f *Fault) Remove() {
	f.p.mu.Lock()
	defer f.p.mu.Unlock()
	for i, x := range f.p.faults {
		if x == f {
			f.p.faults = append(f.p.faults[:i], f.p.faults[i+1:]...)
			break
		}
	}
}

// Start starts a proxy in front of the API server of cfg (a cluster
// admin's config) and stops it when the test ends.
func Start(t testing.TB, cfg *rest.Config) *Proxy {
	t.Helper()
	target, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatalf("parse host %q: %v", cfg.Host, err)
	}
	admin, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatalf("admin transport: %v", err)
	}
	anon, err := rest.TransportFor(&rest.Config{Host: cfg.Host, TLSClientConfig: rest.TLSClientConfig{
		CAData: cfg.CAData, CAFile: cfg.CAFile, ServerName: cfg.ServerName, Insecure: cfg.Insecure}})
	if err != nil {
		t.Fatalf("transport: %v", err)
	}
	ca, err := tinyca.New("recond fault proxy CA")
	if err != nil {
		t.Fatalf("proxy CA: %v", err)
	}
	cert, err := ca.ServingCert()
	if err != nil {
		t.Fatalf("proxy certificate: %v", err)
	}
	p := &Proxy{t: t, caPEM: ca.CertPEM(), admin: admin, anon: anon, target: target,
		conns: map[net.Conn]struct{}{}, watches: map[*watchBody]struct{}{},
		tlsCfg: &tls.Config{Certificates: []tls.Certificate{cert.TLS()}, NextProtos: []string{"http/1.1"}}}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serve), ReadHeaderTimeout: 10 * time.Second,
		ConnState: p.connState, ErrorLog: log.New(io.Discard, "", 0)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.URL = "https://" + p.addr
	p.listen(ln)
	t.Cleanup(func() {
		p.Clear()
		// Closing the connections cancels held requests too.
		_ = p.srv.Close()
	})
	return p
}

func (p *Proxy) listen(ln net.Listener) {
	p.ln = ln
	tl := tls.NewListener(ln, p.tlsCfg)
	go func() { _ = p.srv.Serve(tl) }()
}

func (p *Proxy) connState(c net.Conn, s http.ConnState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch s {
	case http.StateNew:
		p.conns[c] = struct{}{}
	case http.StateClosed, http.StateHijacked:
		delete(p.conns, c)
	}
}

// Add programs a fault and returns it (to count its hits or Remove it). An
// Expire fault also ends the matching watch streams already open.
func (p *Proxy) Add(f Fault) *Fault {
	p.mu.Lock()
	nf := f
	nf.p = p
	p.faults = append(p.faults, &nf)
	var expire []*watchBody
	if nf.Expire {
		for w := range p.watches {
			if nf.Match.matches(w.req, true) && (nf.Times == 0 || nf.hits < nf.Times) {
				nf.hits++
				expire = append(expire, w)
			}
		}
	}
	p.mu.Unlock()
	for _, w := range expire {
		w.end(errExpired)
	}
	return &nf
}

// Clear removes every fault.
func (p *Proxy) Clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = nil
}

// SetDown refuses every connection (the port is closed: connection refused,
// and open connections, watches included, are closed) while down is true.
func (p *Proxy) SetDown(down bool) {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if down == p.down {
		return
	}
	p.down = down
	if down {
		_ = p.ln.Close()
		for c := range p.conns {
			_ = c.Close()
		}
		return
	}
	ln, err := tools.Relisten(p.addr)
	if err != nil {
		p.t.Fatalf("listen again on %s: %v", p.addr, err)
	}
	p.listen(ln)
}

// CutWatches closes every open watch stream now, mid-stream (the client sees
// the connection end without a final event), and returns how many it cut.
func (p *Proxy) CutWatches() int {
	p.mu.Lock()
	ws := make([]*watchBody, 0, len(p.watches))
	for w := range p.watches {
		ws = append(ws, w)
	}
	p.mu.Unlock()
	for _, w := range ws {
		w.cut()
	}
	return len(ws)
}

// OpenWatches is the number of watch streams open through the proxy.
func (p *Proxy) OpenWatches() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.watches)
}

// Requests is how many requests the proxy received.
func (p *Proxy) Requests() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.total
}

// OnRequest calls fn (under the proxy's lock: fn must not call the proxy)
// with every request the proxy receives, before any fault.
func (p *Proxy) OnRequest(fn func(*http.Request)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen = fn
}

// KubeConfig writes a kubeconfig for the proxy (its CA, no credentials: the
// proxy forwards as the admin) and returns its path.
func (p *Proxy) KubeConfig(t testing.TB) string {
	t.Helper()
	return p.writeKubeConfig(t, "")
}

// KubeConfigWithToken writes a kubeconfig for the proxy that authenticates
// with token (a ServiceAccount's), forwarded as is, and returns its path.
func (p *Proxy) KubeConfigWithToken(t testing.TB, token string) string {
	t.Helper()
	return p.writeKubeConfig(t, token)
}

func (p *Proxy) writeKubeConfig(t testing.TB, token string) string {
	t.Helper()
	cfg := p.RESTConfig()
	cfg.BearerToken = token
	return kubeconfig.Write(t, cfg)
}

// RESTConfig is a rest.Config for the proxy (as the admin).
func (p *Proxy) RESTConfig() *rest.Config {
	return &rest.Config{Host: p.URL, TLSClientConfig: rest.TLSClientConfig{CAData: p.caPEM}}
}

func isWatch(r *http.Request) bool {
	w := r.URL.Query().Get("watch")
	return w == "true" || w == "1" || strings.Contains(r.URL.Path, "/watch/")
}

func (m Match) matches(r *http.Request, watch bool) bool {
	if m.Method != "" && !strings.EqualFold(m.Method, r.Method) {
		return false
	}
	if m.Path != "" && !strings.Contains(r.URL.Path, m.Path) {
		return false
	}
	if m.Query != "" && !strings.Contains(r.URL.RawQuery, m.Query) {
		return false
	}
	switch m.Watch {
	case WatchOnly:
		return watch
	case NoWatch:
		return !watch
	}
	return true
}

// take returns the faults that match r, counting a hit on each and using up
// their Times. The caller holds p.mu.
func (p *Proxy) take(r *http.Request, watch bool, pred func(*Fault) bool) []*Fault {
	var out []*Fault
	for _, f := range p.faults {
		if !pred(f) || !f.Match.matches(r, watch) || (f.Times > 0 && f.hits >= f.Times) {
			continue
		}
		f.hits++
		out = append(out, f)
	}
	return out
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	watch := isWatch(r)
	p.mu.Lock()
	p.total++
	if p.seen != nil {
		p.seen(r)
	}
	fs := p.take(r, watch, func(f *Fault) bool { return !f.Stall && !f.Drop })
	p.mu.Unlock()
	var (
		delay time.Duration
		hold  []chan struct{}
		ans   *Fault
	)
	for _, f := range fs {
		delay += f.Delay
		if f.Hold != nil {
			hold = append(hold, f.Hold)
		}
		if ans == nil && (f.Status != 0 || (f.Expire && watch)) {
			ans = f
		}
	}
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	for _, h := range hold {
		select {
		case <-h:
		case <-r.Context().Done():
			return
		}
	}
	if ans != nil {
		if ans.Status != 0 {
			writeStatus(w, ans.Status, ans.RetryAfter)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, expiredEvent)
		return
	}
	rt := p.admin
	if r.Header.Get("Authorization") != "" {
		rt = p.anon
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(p.target)
			if watch {
				// Watches are asked for as JSON lines (every client
				// accepts them; typed clients prefer protobuf), so the
				// stream can be read, dropped and ended event by event.
				pr.Out.Header.Set("Accept", "application/json")
				pr.Out.Header.Del("Accept-Encoding")
			}
		},
		Transport:     rt,
		FlushInterval: -1,
		ErrorLog:      log.New(io.Discard, "", 0),
		// The API server behind is unreachable: answer as a load balancer
		// in front of it would.
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			if errors.Is(err, context.Canceled) {
				return
			}
			writeStatus(w, http.StatusServiceUnavailable, 0)
		},
	}
	if watch {
		rp.ModifyResponse = func(resp *http.Response) error {
			if resp.StatusCode != http.StatusOK {
				return nil
			}
			wb := &watchBody{p: p, req: r, src: resp.Body, rd: bufio.NewReaderSize(resp.Body, 64<<10)}
			p.mu.Lock()
			p.watches[wb] = struct{}{}
			p.mu.Unlock()
			resp.Body = wb
			return nil
		}
	}
	rp.ServeHTTP(w, r)
}

const expiredEvent = `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",` +
	`"message":"too old resource version (injected by the fault proxy)","reason":"Expired","code":410}}` + "\n"

func writeStatus(w http.ResponseWriter, code, retryAfter int) {
	reason := map[int]string{429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable",
		504: "Timeout", 502: "InternalError"}[code]
	if reason == "" {
		reason = "Unknown"
	}
	if retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"%s (injected by the fault proxy)","reason":"%s","code":%d}`,
		http.StatusText(code), reason, code)
}

// watchBody is the body of one open watch stream: it forwards the stream
// event by event (JSON lines: the proxy asks for JSON), dropping events while a Stall fault matches
// (and all but bookmarks while a Drop fault does),
// ending with a 410 ERROR event when an Expire fault is added, and failing
// mid-stream when cut.
type watchBody struct {
	p    *Proxy
	req  *http.Request
	src  io.ReadCloser
	rd   *bufio.Reader
	pend []byte

	once sync.Once
	mu   sync.Mutex
	err  error // errCut or errExpired once ended
}

var (
	errCut     = errors.New("watch stream cut by the fault proxy")
	errExpired = errors.New("watch stream expired by the fault proxy")
)

func (b *watchBody) cut() { b.end(errCut) }

// end stops forwarding: the stream fails (errCut) or ends with a 410 event
// (errExpired).
func (b *watchBody) end(why error) {
	b.mu.Lock()
	if b.err == nil {
		b.err = why
	}
	b.mu.Unlock()
	b.close()
}

func (b *watchBody) close() {
	b.once.Do(func() {
		_ = b.src.Close()
		b.p.mu.Lock()
		delete(b.p.watches, b)
		b.p.mu.Unlock()
	})
}

func (b *watchBody) ended() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

func (b *watchBody) Read(out []byte) (int, error) {
	for len(b.pend) == 0 {
		if err := b.ended(); err != nil {
			if err == errExpired {
				b.mu.Lock()
				b.err = io.EOF
				b.mu.Unlock()
				b.pend = []byte(expiredEvent)
				break
			}
			return 0, err
		}
		line, rerr := b.rd.ReadBytes('\n')
		if err := b.ended(); err != nil {
			continue
		}
		if rerr != nil {
			b.close()
			return 0, rerr
		}
		b.p.mu.Lock()
		// An event that arrives during a stall is lost, as on a stream
		// that silently stopped.
		stalled := len(b.p.take(b.req, true, func(f *Fault) bool { return f.Stall })) > 0
		if !stalled && !bytes.HasPrefix(line, []byte(`{"type":"BOOKMARK"`)) {
			stalled = len(b.p.take(b.req, true, func(f *Fault) bool { return f.Drop })) > 0
		}
		b.p.mu.Unlock()
		if !stalled {
			b.pend = line
		}
	}
	n := copy(out, b.pend)
	b.pend = b.pend[n:]
	return n, nil
}

func (b *watchBody) Close() error {
	b.close()
	return nil
}
