package faults

import (
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"recond.dev/recond/internal/testenv"
)

const (
	hookSecret = "fault-matrix-webhook-secret"
	syncToken  = "fault-matrix-sync-token"
)

// startServing runs recond with the sync API and the webhook on, following
// main, on an interval of a minute: after the first tick, every tick is one
// a request asked for.
func startServing(t *testing.T) *Recond {
	t.Helper()
	repo := testenv.NewRepo(t)
	repo.Commit("first", map[string]string{"keep.yaml": manifestCM("keep", "v1")})
	n := cp.Namespace(t)
	args := append(Base(t, repo.URL(), n, Kubeconfig(t)), "--interval", "1m", "--ref", "main",
		"--sync-token-file", WriteFile(t, "token", syncToken+"\n"), "--webhook-secret-file", WriteFile(t, "secret", hookSecret+"\n"))
	r := StartRecond(t, args...)
	r.WaitTick(30*time.Second, 0, Succeeded)
	return r
}

// pushBody is a GitHub push to main whose body differs per delivery (as
// GitHub's do: the after SHA).
func pushBody(delivery string) []byte {
	after := sha256.Sum256([]byte(delivery))
	return fmt.Appendf(nil, `{"ref":"refs/heads/main","before":"0000000000000000000000000000000000000000","after":"%x","repository":{"full_name":"org/repo"}}`, after[:20])
}

// answerCounts counts answers by status code. Safe for concurrent use.
type answerCounts struct {
	mu sync.Mutex
	m  map[int]int
}

func (c *answerCounts) add(code int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[int]int{}
	}
	c.m[code]++
}

func (c *answerCounts) get(code int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[code]
}

func (c *answerCounts) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprint(c.m)
}

// floodRequests sends n requests made by mk from workers goroutines, paced
// to last about d, and counts the answers (0: the request failed).
func floodRequests(client *http.Client, n, workers int, d time.Duration, mk func(i int) *http.Request) *answerCounts {
	c := &answerCounts{}
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				// Request i is due at start + d*i/n.
				time.Sleep(time.Until(start.Add(d * time.Duration(i) / time.Duration(n))))
				resp, err := client.Do(mk(i))
				if err != nil {
					c.add(0)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				c.add(resp.StatusCode)
			}
		}()
	}
	wg.Wait()
	return c
}

// procUsage is what the process holds: resident memory, goroutines, open
// file descriptors.
type procUsage struct{ rss, goroutines, fds float64 }

func (r *Recond) procUsage() procUsage {
	return procUsage{rss: r.Metric("process_resident_memory_bytes", nil), goroutines: r.Metric("go_goroutines", nil),
		fds: r.Metric("process_open_fds", nil)}
}

func (x procUsage) String() string {
	return fmt.Sprintf("RSS %.1f MiB, %v goroutines, %v fds", x.rss/(1<<20), x.goroutines, x.fds)
}

// Margins for "flat": what a flood may leave behind once its connections
// are closed.
const (
	rssMargin       = 32 << 20
	goroutineMargin = 10
	fdMargin        = 5
)

// afterFlood is what a flood of requests through client left: the
// process's usage right after it; once the ticks it asked for (by trigger,
// above tick after) have run, how many there were; and the usage back
// within margins of before.
func afterFlood(t *testing.T, r *Recond, client *http.Client, before procUsage, after uint64, trigger string) (during procUsage, ticks int, back procUsage) {
	t.Helper()
	during = r.procUsage()
	client.CloseIdleConnections()
	r.WaitTick(minWait, after, isTrigger(trigger)) // the accepted requests' ticks run
	time.Sleep(time.Second)
	ticks = ticksBy(r, after, trigger)
	return during, ticks, backWithinMargins(t, r, before)
}

// backWithinMargins waits (up to minWait, a guard against a hang) until
// the process is back within the margins of before, and checks it.
func backWithinMargins(t *testing.T, r *Recond, before procUsage) procUsage {
	t.Helper()
	var after procUsage
	for deadline := time.Now().Add(minWait); ; time.Sleep(200 * time.Millisecond) {
		after = r.procUsage()
		ok := after.rss <= before.rss+rssMargin && after.goroutines <= before.goroutines+goroutineMargin && after.fds <= before.fds+fdMargin
		if ok || time.Now().After(deadline) {
			break
		}
	}
	if after.rss > before.rss+rssMargin {
		t.Errorf("RSS %.1f MiB after, %.1f MiB before: grew by more than %d MiB", after.rss/(1<<20), before.rss/(1<<20), rssMargin>>20)
	}
	if after.goroutines > before.goroutines+goroutineMargin {
		t.Errorf("%v goroutines after, %v before", after.goroutines, before.goroutines)
	}
	if after.fds > before.fds+fdMargin {
		t.Errorf("%v open fds after, %v before", after.fds, before.fds)
	}
	return after
}

// ticksBy counts the ticks above after with trigger.
func ticksBy(r *Recond, after uint64, trigger string) int {
	n := 0
	for _, tk := range r.Ticks() {
		if tk.ID > after && tk.Trigger == trigger {
			n++
		}
	}
	return n
}

// idleClient is an HTTP client with up to conns keep-alive connections. Its
// timeout only guards against a hang.
func idleClient(conns int) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}}
}

// isTrigger accepts a tick that trigger asked for.
func isTrigger(trigger string) func(Tick) bool {
	return func(tk Tick) bool { return tk.Trigger == trigger }
}

// TestFaultHTTPWebhookFlood: 2,000 signed pushes with distinct deliveries in
// about 10 s from 8 goroutines. The per-client rate limit (10/s after a
// burst of 100) answers the excess 429, counted as limited; the accepted
// ones coalesce (a 200 ms debounce) into far fewer ticks; memory,
// goroutines and file descriptors are back within a margin of where they
// were; recond keeps converging.
func TestFaultHTTPWebhookFlood(t *testing.T) {
	r := startServing(t)
	hooks := r.Addr + "/hooks/git"
	client := idleClient(8)
	// Warm up the paths the flood takes, then measure.
	for i := range 5 {
		resp, err := client.Do(testenv.GitHubPush(hooks, fmt.Sprintf("warm-%d", i), pushBody(fmt.Sprintf("warm-%d", i)), hookSecret))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	r.WaitTick(minWait, 0, isTrigger("webhook")) // the warm-up's tick has run
	time.Sleep(3 * time.Second)                  // the bucket refilled (at least)
	before, last := r.procUsage(), r.LastTick().ID
	limited0 := r.Metric("recond_webhook_requests_total", map[string]string{"result": "limited"})
	start := time.Now()
	got := floodRequests(client, 2000, 8, 10*time.Second, func(i int) *http.Request {
		d := fmt.Sprintf("flood-%d", i)
		return testenv.GitHubPush(hooks, d, pushBody(d), hookSecret)
	})
	took := time.Since(start)
	during, ticks, after := afterFlood(t, r, client, before, last, "webhook")
	limited := r.Metric("recond_webhook_requests_total", map[string]string{"result": "limited"}) - limited0
	accepted := got.get(http.StatusAccepted)
	t.Logf("webhook flood: 2000 deliveries in %s: answers %s; %v counted limited; %d webhook ticks; before %s, during %s, after %s",
		took.Round(time.Millisecond), got, limited, ticks, before, during, after)
	if r.Exited() {
		t.Fatal("recond exited during the flood")
	}
	// 100 at once, then 10/s: about 200 of 2,000 in 10 s. The bucket
	// refills over the flood's own length, so a busy machine (a longer
	// flood) raises the bound with the refill.
	if want := 100 + int(took.Seconds()*10) + 20; accepted > want || accepted == 0 {
		t.Errorf("%d deliveries accepted in %s, want 1 to %d (the rate limit)", accepted, took, want)
	}
	// Every other delivery is limited, and counted so.
	if n := got.get(http.StatusTooManyRequests); float64(n) != limited || accepted+n != 2000 {
		t.Errorf("%d answered 429, %v counted limited, %d accepted; want the same count, and 2000 in all", n, limited, accepted)
	}
	if got.get(0) > 0 {
		t.Errorf("%d requests failed (no answer)", got.get(0))
	}
	// At most one tick per debounce (200 ms), and far fewer than accepted.
	if limit := int(took/(200*time.Millisecond)) + 2; ticks > limit || ticks > accepted/2 || ticks == 0 {
		t.Errorf("%d webhook ticks for %d accepted deliveries in %s, want 1 to %d (coalesced)", ticks, accepted, took, min(limit, accepted/2))
	}
	for _, tk := range r.Ticks() {
		if tk.ID > last && tk.Failed() {
			t.Errorf("tick failed during the flood: %s", tk)
		}
	}
}

// TestFaultHTTPSyncFlood: 2,000 POST /api/v1/sync without the token, and
// meanwhile one with it; then 2,000 with it. Refused ones are 401 until
// the refusal limit (20/s after 50), then 429, which costs no log line; the
// one with the token is served during the flood; the 2,000 with the token
// are all accepted and coalesce into few ticks; memory stays flat.
func TestFaultHTTPSyncFlood(t *testing.T) {
	r := startServing(t)
	url := r.Addr + "/api/v1/sync"
	client := idleClient(8)
	post := func(token string) *http.Request {
		req, _ := http.NewRequest(http.MethodPost, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		return req
	}
	for range 3 {
		resp, err := client.Do(post(syncToken))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	time.Sleep(2 * time.Second)
	before, last := r.procUsage(), r.LastTick().ID
	logLines := len(r.Lines())

	// Without the token, and one with it in the middle.
	var served struct {
		code int
		took time.Duration
		err  error
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(5 * time.Second)
		c := http.Client{Timeout: 30 * time.Second}
		start := time.Now()
		resp, err := c.Do(post(syncToken))
		served.took, served.err = time.Since(start), err
		if err == nil {
			served.code = resp.StatusCode
			resp.Body.Close()
		}
	}()
	start := time.Now()
	refused := floodRequests(client, 2000, 8, 10*time.Second, func(int) *http.Request { return post("wrong") })
	tookRefused := time.Since(start)
	<-done
	if served.err == nil && served.code == http.StatusAccepted {
		r.WaitTick(minWait, last, isTrigger("manual")) // its tick has run
	}
	refusedLines := 0
	for _, l := range r.Lines()[logLines:] {
		if strings.HasPrefix(l.Msg(), "sync request refused") {
			refusedLines++
		}
	}
	manualAfterRefused := ticksBy(r, last, "manual")

	start = time.Now()
	mid := r.LastTick().ID
	accepted := floodRequests(client, 2000, 8, 10*time.Second, func(int) *http.Request { return post(syncToken) })
	tookAccepted := time.Since(start)
	during, ticks, after := afterFlood(t, r, client, before, mid, "manual")
	t.Logf("sync flood without the token: %s in %s (%d refusals logged); with the token during it: %d in %s; with the token: %s in %s, %d manual ticks; before %s, during %s, after %s",
		refused, tookRefused.Round(time.Millisecond), refusedLines, served.code, served.took.Round(time.Millisecond),
		accepted, tookAccepted.Round(time.Millisecond), ticks, before, during, after)
	if r.Exited() {
		t.Fatal("recond exited during the flood")
	}
	// 50 at once, then 20/s (over the flood's own length, as above).
	if want := 50 + int(tookRefused.Seconds()*20) + 20; refused.get(http.StatusUnauthorized) > want ||
		refused.get(http.StatusUnauthorized)+refused.get(http.StatusTooManyRequests) != 2000 {
		t.Errorf("without the token: %s; want at most %d 401 and the rest 429", refused, want)
	}
	if refusedLines != refused.get(http.StatusUnauthorized) {
		t.Errorf("%d refusals logged for %d answered 401: a limited one is not logged", refusedLines, refused.get(http.StatusUnauthorized))
	}
	if served.err != nil || served.code != http.StatusAccepted {
		t.Errorf("with the token during the flood without it: %d %v, want 202", served.code, served.err)
	}
	if manualAfterRefused != 1 {
		t.Errorf("%d manual ticks after the refused flood and one request with the token, want 1", manualAfterRefused)
	}
	if accepted.get(http.StatusAccepted) != 2000 {
		t.Errorf("with the token: %s, want all 2000 accepted (never limited)", accepted)
	}
	if limit := int(tookAccepted/(200*time.Millisecond)) + 2; ticks > limit || ticks == 0 {
		t.Errorf("%d manual ticks for 2000 accepted requests in %s, want 1 to %d (coalesced)", ticks, tookAccepted, limit)
	}
}

// slowConn is one slow client: when it started, when the server closed
// its connection (zero: still open), how many bytes it had dribbled by
// then, and the status line it got.
type slowConn struct {
	start, closed time.Time
	sent          int
	answer        string
}

// dribble opens a connection, writes head at once (then calls opened) and
// then rest one byte a second or slower, until the server closes the
// connection or it has dribbled maxBytes bytes: the bound is in the
// client's own writes, and a busy machine only spaces them further. It
// returns when and with what answer the server closed it, and calls closed
// as soon as it sees the close.
func dribble(addr, head, rest string, maxBytes int, opened, closed func()) slowConn {
	s := slowConn{start: time.Now()}
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		opened()
		closed()
		s.closed, s.answer = time.Now(), "dial: "+err.Error()
		return s
	}
	defer conn.Close()
	readDone := make(chan struct{})
	var answered atomic.Value // the status line, as soon as it arrives
	go func() {
		defer close(readDone)
		var b []byte
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			b = append(b, buf[:n]...)
			if line, _, ok := strings.Cut(string(b), "\r\n"); ok && answered.Load() == nil {
				answered.Store(line)
			}
			if err != nil {
				break
			}
		}
		s.closed = time.Now()
		s.answer, _, _ = strings.Cut(string(b), "\r\n")
		closed()
	}()
	_, _ = io.WriteString(conn, head)
	opened()
	for i := 0; ; i++ {
		select {
		case <-readDone:
			s.sent = i
			return s
		case <-time.After(time.Second):
		}
		if i == maxBytes {
			_ = conn.Close()
			<-readDone
			a, _ := answered.Load().(string)
			return slowConn{start: s.start, sent: i, answer: "still open, answered " + strconv.Quote(a)}
		}
		_, _ = io.WriteString(conn, rest[i%len(rest):i%len(rest)+1])
	}
}

// TestFaultHTTPSlowloris: 200 connections send their request headers one
// byte a second, 20 more a webhook body and 10 a sync request's body one
// byte a second. The server closes the first at ReadHeaderTimeout (5 s),
// the webhook ones at the webhook's body deadline (10 s, answered 408) and
// the sync ones at ReadTimeout (15 s); meanwhile GET /healthz and a signed
// webhook are served, and the open file descriptors return to where they
// were.
//
// Each kind of slow client is bounded in the bytes it dribbles, a second or
// more apart: the server must close it before twice its timeout's seconds
// of bytes (10, 20, 30). A connection held for the body's 200 bytes, or a
// header held to ReadTimeout (15 s), fails; the measured times are logged.
func TestFaultHTTPSlowloris(t *testing.T) {
	r := startServing(t)
	addr := strings.TrimPrefix(r.Addr, "http://")
	time.Sleep(time.Second)
	before := r.procUsage()
	const headers, bodies, syncs = 200, 20, 10
	const all = headers + bodies + syncs
	// The bounds, in bytes dribbled: twice each timeout, in seconds.
	const headerBytes, bodyBytes, syncBytes = 2 * 5, 2 * 10, 2 * 15
	results := make([]slowConn, all)
	var (
		wg, opened sync.WaitGroup
		closes     atomic.Int64
	)
	opened.Add(all)
	closed := func() { closes.Add(1) }
	for i := range headers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = dribble(addr, "GET /healthz HTTP/1.1\r\nHost: recond\r\nX-Slow: ", strings.Repeat("a", 64), headerBytes, opened.Done, closed)
		}()
	}
	for i := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			head := fmt.Sprintf("POST /hooks/git HTTP/1.1\r\nHost: recond\r\nContent-Type: application/json\r\nX-GitHub-Event: push\r\n"+
				"X-GitHub-Delivery: slow-%d\r\nX-Hub-Signature-256: sha256=%s\r\nContent-Length: 200\r\n\r\n", i, strings.Repeat("0", 64))
			results[headers+i] = dribble(addr, head, strings.Repeat(" ", 200), bodyBytes, opened.Done, closed)
		}()
	}
	for i := range syncs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			head := "POST /api/v1/sync HTTP/1.1\r\nHost: recond\r\nAuthorization: Bearer " + syncToken + "\r\nContent-Length: 200\r\n\r\n"
			results[headers+bodies+i] = dribble(addr, head, strings.Repeat(" ", 200), syncBytes, opened.Done, closed)
		}()
	}
	// Meanwhile, once every slow client has sent its head, the server
	// serves others.
	opened.Wait()
	during := r.procUsage()
	// The server holds at least the connections the clients still see
	// open after the sample (it closes before they see it).
	stillHeld := all - int(closes.Load())
	c := http.Client{Timeout: 30 * time.Second}
	start := time.Now()
	resp, err := c.Get(r.Addr + "/healthz")
	healthzAt := time.Now()
	healthz := healthzAt.Sub(start)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("GET /healthz during the slowloris: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	start = time.Now()
	resp, err = c.Do(testenv.GitHubPush(r.Addr+"/hooks/git", "during-slowloris", pushBody("during-slowloris"), hookSecret))
	hookAt := time.Now()
	hook := hookAt.Sub(start)
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Errorf("a signed webhook during the slowloris: %v %v, want 202", resp, err)
	} else {
		resp.Body.Close()
	}
	wg.Wait()
	after := backWithinMargins(t, r, before)

	worst := func(rs []slowConn) (time.Duration, int, map[string]int) {
		var w time.Duration
		sent := 0
		answers := map[string]int{}
		for _, s := range rs {
			answers[s.answer]++
			sent = max(sent, s.sent)
			if s.closed.IsZero() {
				continue
			}
			w = max(w, s.closed.Sub(s.start))
		}
		return w, sent, answers
	}
	wh, sh, ah := worst(results[:headers])
	wb, sb, ab := worst(results[headers : headers+bodies])
	ws, ss, as := worst(results[headers+bodies:])
	t.Logf("slowloris: %d header dribblers closed within %s (%d bytes) %v, %d webhook body dribblers within %s (%d bytes) %v, %d sync body dribblers within %s (%d bytes) %v; during: /healthz in %s, webhook in %s; before %s, during %s, after %s",
		headers, wh.Round(time.Millisecond), sh, ah, bodies, wb.Round(time.Millisecond), sb, ab, syncs, ws.Round(time.Millisecond), ss, as,
		healthz.Round(time.Millisecond), hook.Round(time.Millisecond), before, during, after)
	if r.Exited() {
		t.Fatal("recond exited during the slowloris")
	}
	if during.fds < before.fds+float64(stillHeld) {
		t.Errorf("%v open fds during the slowloris, %v before, %d connections open: the connections were not open", during.fds, before.fds, stillHeld)
	}
	if stillOpen(ah) > 0 {
		t.Errorf("header dribblers: %v after %d bytes, want closed at ReadHeaderTimeout 5s", ah, headerBytes)
	}
	if stillOpen(ab) > 0 || ab["HTTP/1.1 408 Request Timeout"] != bodies {
		t.Errorf("webhook body dribblers: %v after %d bytes, want 408 and closed at the webhook's 10s", ab, bodyBytes)
	}
	if stillOpen(as) > 0 {
		t.Errorf("sync body dribblers: %v after %d bytes, want closed at ReadTimeout 15s", as, syncBytes)
	}
	// Served while the slow clients still held connections: before the
	// longest held of them (the sync bodies) were closed.
	for _, s := range results[headers+bodies:] {
		if !s.closed.IsZero() && (s.closed.Before(healthzAt) || s.closed.Before(hookAt)) {
			t.Errorf("/healthz or the webhook answered only after a sync dribbler was closed (%s after it started)", s.closed.Sub(s.start).Round(time.Millisecond))
			break
		}
	}
}

// TestFaultHTTPReplays: the same signed delivery 100 times is accepted once
// and answered replayed 99 times (counted so), and asks for one tick; the
// same body under 10 fresh delivery ids is a replay too.
func TestFaultHTTPReplays(t *testing.T) {
	r := startServing(t)
	hooks := r.Addr + "/hooks/git"
	last := r.LastTick().ID
	client := idleClient(1)
	body := pushBody("once")
	got := &answerCounts{}
	for range 100 {
		resp, err := client.Do(testenv.GitHubPush(hooks, "once", body, hookSecret))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		got.add(resp.StatusCode)
	}
	r.WaitTick(minWait, last, isTrigger("webhook")) // its tick has run
	time.Sleep(2 * time.Second)                     // the bucket refilled (at least)
	for i := range 10 {
		resp, err := client.Do(testenv.GitHubPush(hooks, fmt.Sprintf("fresh-id-%d", i), body, hookSecret))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		got.add(resp.StatusCode)
	}
	time.Sleep(time.Second)
	accepted := r.Metric("recond_webhook_requests_total", map[string]string{"result": "accepted"})
	replayed := r.Metric("recond_webhook_requests_total", map[string]string{"result": "replayed"})
	ticks := ticksBy(r, last, "webhook")
	t.Logf("replays: answers %s; counted accepted %v, replayed %v; %d webhook ticks", got, accepted, replayed, ticks)
	if got.get(http.StatusAccepted) != 1 || got.get(http.StatusOK) != 109 {
		t.Errorf("answers %s, want one 202 and 109 200 (replayed)", got)
	}
	if accepted != 1 || replayed != 109 {
		t.Errorf("recond_webhook_requests_total: accepted %v, replayed %v; want 1 and 109", accepted, replayed)
	}
	if ticks != 1 {
		t.Errorf("%d webhook ticks, want 1", ticks)
	}
	if r.Exited() {
		t.Fatal("recond exited")
	}
}

// stillOpen counts the connections the server never closed.
func stillOpen(answers map[string]int) int {
	n := 0
	for a, c := range answers {
		if strings.HasPrefix(a, "still open") {
			n += c
		}
	}
	return n
}
