package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/time/rate"
)

// TestDocumentedDeliveries sends each provider's documented body with its
// headers and a valid signature, and checks the answer, the ticks asked for
// and the count.
func TestDocumentedDeliveries(t *testing.T) {
	for _, c := range loadCases(t) {
		t.Run(c.Name, func(t *testing.T) {
			var rec recorder
			srv := serve(t, rec.config(c.Follows))
			body := c.body(t)
			status, got, _ := post(t, srv, c.header(testSecret, body), bytes.NewReader(body))

			want := Answer{Result: c.Result}
			wantTicks := []string(nil)
			if c.Result == Accepted {
				want.Tick = 1
				wantTicks = []string{c.Provider}
			}
			if status != c.Status {
				t.Errorf("status = %d, want %d", status, c.Status)
			}
			if diff := cmp.Diff(want, got, ignoreMessage); diff != "" {
				t.Errorf("answer (-want +got):\n%s", diff)
			}
			if c.Message != "" && got.Message != c.Message {
				t.Errorf("message = %q, want %q", got.Message, c.Message)
			}
			if diff := cmp.Diff(wantTicks, rec.ticks); diff != "" {
				t.Errorf("ticks asked for (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(map[[2]string]int{{c.Provider, c.Result}: 1}, rec.observed); diff != "" {
				t.Errorf("observed (-want +got):\n%s", diff)
			}
		})
	}
}

var ignoreMessage = cmp.FilterPath(func(p cmp.Path) bool { return p.String() == "Message" }, cmp.Ignore())

// TestUnauthorized sends each provider's accepted delivery with its proof
// missing, wrong, or over another body, and a delivery from no known
// provider: all get 401, no tick, a count, and a log line that holds neither
// the secret nor the signature.
func TestUnauthorized(t *testing.T) {
	type variant struct {
		name   string
		mutate func(h http.Header, body []byte) []byte
	}
	proofHeaders := []string{"X-Hub-Signature-256", "X-Gitea-Signature", "X-Forgejo-Signature", "X-Gitlab-Token", "X-Hub-Signature"}
	variants := []variant{
		{"missing", func(h http.Header, b []byte) []byte {
			for _, k := range proofHeaders {
				h.Del(k)
			}
			return b
		}},
		{"signed with another secret", func(h http.Header, b []byte) []byte {
			other := []byte("not the secret")
			for _, k := range proofHeaders {
				switch v := h.Get(k); {
				case v == "":
				case k == "X-Gitlab-Token":
					h.Set(k, string(other))
				case strings.HasPrefix(v, "sha256="):
					h.Set(k, "sha256="+hmacHex(other, b))
				default:
					h.Set(k, hmacHex(other, b))
				}
			}
			return b
		}},
		{"body changed after signing", func(h http.Header, b []byte) []byte {
			return bytes.Replace(b, []byte(`"ref"`), []byte(`"ref" `), 1)
		}},
		{"secret as a prefix", func(h http.Header, b []byte) []byte {
			for _, k := range proofHeaders {
				if h.Get(k) != "" && k == "X-Gitlab-Token" {
					h.Set(k, string(testSecret)+"x")
				} else if v := h.Get(k); v != "" {
					h.Set(k, v[:len(v)-2])
				}
			}
			return b
		}},
	}
	for provider, c := range acceptedCases(t) {
		for _, v := range variants {
			if provider == GitLab && v.name == "body changed after signing" {
				// GitLab's token authenticates the sender, not the body.
				continue
			}
			if provider == Bitbucket && v.name == "body changed after signing" {
				// Bitbucket's body has no top-level "ref": change a commit.
				v.mutate = func(h http.Header, b []byte) []byte {
					return bytes.Replace(b, []byte("new commit message"), []byte("new commit massage"), 1)
				}
			}
			t.Run(provider+"/"+v.name, func(t *testing.T) {
				var rec recorder
				srv := serve(t, rec.config(c.Follows))
				body := c.body(t)
				h := c.header(testSecret, body)
				signature := hmacHex(testSecret, body)
				body = v.mutate(h, body)
				status, got, _ := post(t, srv, h, bytes.NewReader(body))
				checkUnauthorized(t, &rec, provider, status, got, signature)
			})
		}
	}
	t.Run("unknown provider", func(t *testing.T) {
		var rec recorder
		srv := serve(t, rec.config("refs/heads/master"))
		body := []byte(`{"ref":"refs/heads/master"}`)
		h := http.Header{"Content-Type": {"application/json"}, "X-Gogs-Event": {"push"},
			"X-Hub-Signature-256": {"sha256=" + hmacHex(testSecret, body)}}
		status, got, _ := post(t, srv, h, bytes.NewReader(body))
		checkUnauthorized(t, &rec, Unknown, status, got, hmacHex(testSecret, body))
	})
}

func checkUnauthorized(t *testing.T, rec *recorder, provider string, status int, got Answer, signature string) {
	t.Helper()
	if status != http.StatusUnauthorized || got.Result != Unauthorized {
		t.Errorf("answer = %d %+v, want 401 %s", status, got, Unauthorized)
	}
	if n := rec.tickCount(); n != 0 {
		t.Errorf("%d ticks asked for, want 0", n)
	}
	if diff := cmp.Diff(map[[2]string]int{{provider, Unauthorized}: 1}, rec.observed); diff != "" {
		t.Errorf("observed (-want +got):\n%s", diff)
	}
	log := rec.logText()
	if !strings.Contains(log, "level=WARN") || !strings.Contains(log, "remote=127.0.0.1") {
		t.Errorf("no warning with the remote address in the log:\n%s", log)
	}
	if strings.Contains(log, string(testSecret)) || strings.Contains(log, signature[:16]) {
		t.Errorf("log holds the secret or the signature:\n%s", log)
	}
	if strings.Contains(got.Message, string(testSecret)) {
		t.Errorf("answer echoes the secret: %+v", got)
	}
}

// TestReplay checks that an authentic delivery is acted on once within the
// window, whether it comes back under the same delivery id or under a new
// one, that an unauthenticated request does not poison the cache, and that
// the window ends.
func TestReplay(t *testing.T) {
	for provider, c := range acceptedCases(t) {
		t.Run(provider, func(t *testing.T) {
			var rec recorder
			clk := newClock()
			cfg := rec.config(c.Follows)
			cfg.Now = clk.Now
			srv := serve(t, cfg)
			body := c.body(t)

			// A forged request under the real delivery id comes first.
			forged := c.header([]byte("forged"), body)
			if provider == GitLab {
				forged.Set("X-Gitlab-Token", "forged")
			}
			if status, _, _ := post(t, srv, forged, bytes.NewReader(body)); status != http.StatusUnauthorized {
				t.Fatalf("forged: status %d, want 401", status)
			}

			h := c.header(testSecret, body)
			steps := []struct {
				name    string
				header  http.Header
				body    []byte
				advance time.Duration
				want    string
			}{
				{"first", h, body, 0, Accepted},
				{"same delivery again", h, body, time.Minute, Replayed},
				{"same body, new delivery id", withNewDelivery(h), body, time.Minute, Replayed},
				{"after the window", h, body, DefaultReplayWindow, Accepted},
			}
			if provider != Bitbucket || h.Get("X-Request-UUID") != "" {
				other := bytes.Replace(body, []byte(`"ref"`), []byte(`"ref" `), 1)
				if provider == Bitbucket {
					other = bytes.Replace(body, []byte("new commit message"), []byte("new commit massage"), 1)
				}
				steps = append(steps, struct {
					name    string
					header  http.Header
					body    []byte
					advance time.Duration
					want    string
				}{"new body, same delivery id", c.header(testSecret, other), other, time.Minute, Replayed})
			}
			var got []string
			var want []string
			for _, s := range steps {
				clk.Add(s.advance)
				_, a, _ := post(t, srv, s.header, bytes.NewReader(s.body))
				got = append(got, s.name+": "+a.Result)
				want = append(want, s.name+": "+s.want)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("answers (-want +got):\n%s", diff)
			}
			if n := rec.tickCount(); n != 2 {
				t.Errorf("%d ticks asked for, want 2", n)
			}
		})
	}
}

func withNewDelivery(h http.Header) http.Header {
	h = h.Clone()
	for _, k := range []string{"X-GitHub-Delivery", "X-Gitea-Delivery", "X-Forgejo-Delivery", "X-Gitlab-Event-UUID", "Idempotency-Key", "X-Request-UUID", "X-Request-Id"} {
		if h.Get(k) != "" {
			h.Set(k, "00000000-0000-4000-8000-000000000001")
		}
	}
	return h
}

// TestReplayCacheBounded fills the cache past its bound: it never holds
// more keys than the bound, forgets the oldest first, and forgets every key
// once the window has passed.
func TestReplayCacheBounded(t *testing.T) {
	c := newReplayCache(time.Minute, 4)
	start := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	for i := range 10 {
		if c.seen(start.Add(time.Duration(i)*time.Second), fmt.Sprint("k", i)) {
			t.Fatalf("k%d reported as seen on first sight", i)
		}
		if n := c.len(); n > 4 {
			t.Fatalf("cache holds %d keys, bound 4", n)
		}
	}
	now := start.Add(10 * time.Second)
	var got []bool
	for _, k := range []string{"k9", "k8", "k7", "k6", "k5", "k6"} {
		got = append(got, c.seen(now, k))
	}
	// k6..k9 were remembered and k0..k5 forgotten, oldest first; recording
	// k5 anew pushed out k6, the oldest left.
	want := []bool{true, true, true, true, false, false}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("seen (-want +got):\n%s", diff)
	}
	c.seen(now.Add(2*time.Minute), "late")
	if n := c.len(); n != 1 {
		t.Errorf("after the window the cache holds %d keys, want 1", n)
	}
}

// TestOversizeBody sends a body far larger than the cap, with and without a
// Content-Length: the answer is 413 and only about the cap is read.
func TestOversizeBody(t *testing.T) {
	const maxBody = 64 << 10
	c := acceptedCases(t)[GitHub]

	t.Run("in process, chunked", func(t *testing.T) {
		var rec recorder
		cfg := rec.config(c.Follows)
		cfg.MaxBody = maxBody
		h, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		body := &countingReader{n: 1 << 30}
		req := httptest.NewRequest(http.MethodPost, "/hooks/git", body)
		req.ContentLength = -1
		for k, v := range c.header(testSecret, nil) {
			req.Header[k] = v
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusRequestEntityTooLarge {
			t.Errorf("status = %d, want 413", w.Code)
		}
		if n := body.bytesRead(); n > maxBody+1 {
			t.Errorf("read %d bytes of the body, cap %d", n, maxBody)
		}
		if diff := cmp.Diff(map[[2]string]int{{GitHub, Invalid}: 1}, rec.observed); diff != "" {
			t.Errorf("observed (-want +got):\n%s", diff)
		}
	})

	for _, announced := range []bool{false, true} {
		t.Run(fmt.Sprintf("over HTTP, content length announced %v", announced), func(t *testing.T) {
			var rec recorder
			cfg := rec.config(c.Follows)
			cfg.MaxBody = maxBody
			srv := serve(t, cfg)
			const size = 1 << 30
			body := &countingReader{n: size}
			req, err := http.NewRequest(http.MethodPost, srv.URL, io.NopCloser(body))
			if err != nil {
				t.Fatal(err)
			}
			if announced {
				req.ContentLength = size
			}
			for k, v := range c.header(testSecret, nil) {
				req.Header[k] = v
			}
			status, got, _ := do(t, srv.Client(), req)
			if status != http.StatusRequestEntityTooLarge || got.Result != Invalid {
				t.Errorf("answer = %d %+v, want 413 %s", status, got, Invalid)
			}
			// What the client wrote before the server hung up: the cap plus
			// whatever the socket buffers took, far from the body's 1 GiB.
			if n := body.bytesRead(); n > 32<<20 {
				t.Errorf("client wrote %d bytes of a %d byte body", n, size)
			}
			t.Logf("client wrote %d bytes of %d", body.bytesRead(), size)
			if n := rec.tickCount(); n != 0 {
				t.Errorf("%d ticks asked for, want 0", n)
			}
		})
	}
}

// TestSlowBody sends a body that stalls: the read deadline answers 408.
func TestSlowBody(t *testing.T) {
	var rec recorder
	c := acceptedCases(t)[GitHub]
	cfg := rec.config(c.Follows)
	cfg.ReadTimeout = 200 * time.Millisecond
	srv := serve(t, cfg)
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() { _, _ = pw.Write([]byte(`{"ref":`)) }()
	// The 408 itself shows that the read deadline ended the read: the only
	// other way out is the client giving up, which ends the request with an
	// error instead. The client gives up only after a long while: a guard
	// against a hang, not a bound on the answer.
	stop := time.AfterFunc(20*time.Second, func() { pw.CloseWithError(errors.New("client gave up")) })
	defer stop.Stop()
	status, got, _ := post(t, srv, c.header(testSecret, nil), pr)
	if status != http.StatusRequestTimeout || got.Result != Invalid {
		t.Errorf("answer = %d %+v, want 408 %s", status, got, Invalid)
	}
}

// TestSlowBodyClosesTheConnection: a client that sends its body a byte at a
// time gets its 408 at the read timeout, and then the connection is closed,
// however long it goes on sending: the server must not drain the rest of the
// body without a deadline.
//
// The bound is in the client's own writes, not in wall time: the client
// sends at most all but the last byte of the body it announced (the body is
// never complete), one byte at a time with a pause of at least slowPause
// between two, and stops as soon as the server has closed the connection.
// Closed is an end of stream or a reset (the server closes with the client's
// bytes unread in its buffer, which the kernel may turn into a reset): both
// are the server closing. A connection still open after the last byte is the
// failure. Timers never fire early, so the last byte goes at least
// (bodyLen-2)*slowPause after the first, about 200 times the read timeout;
// a busy machine only makes that longer.
func TestSlowBodyClosesTheConnection(t *testing.T) {
	const (
		bodyLen   = 2000
		slowPause = 20 * time.Millisecond
	)
	var rec recorder
	c := acceptedCases(t)[GitHub]
	cfg := rec.config(c.Follows)
	cfg.ReadTimeout = 200 * time.Millisecond
	srv := serve(t, cfg)
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var head strings.Builder
	fmt.Fprintf(&head, "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", bodyLen)
	for k, vs := range c.header(testSecret, nil) {
		for _, v := range vs {
			fmt.Fprintf(&head, "%s: %s\r\n", k, v)
		}
	}
	head.WriteString("\r\n")
	if _, err := io.WriteString(conn, head.String()); err != nil {
		t.Fatal(err)
	}

	// The reader takes everything the server sends until it closes.
	type end struct {
		answer []byte
		err    error
	}
	ended := make(chan end, 1)
	go func() {
		answer, err := io.ReadAll(conn)
		ended <- end{answer, err}
	}()
	// closedBy tells whether err (nil: end of stream) is the server closing.
	closedBy := func(err error) bool {
		return err == nil || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
	}

	sent := 0
	var got end
	var writeErr error
send:
	for ; sent < bodyLen-1; sent++ {
		select {
		case got = <-ended:
			break send
		case <-time.After(slowPause):
		}
		if _, writeErr = conn.Write([]byte("x")); writeErr != nil {
			// A write fails only once the connection is gone: the
			// reader ends too.
			got = <-ended
			break send
		}
	}
	if sent == bodyLen-1 {
		// Every byte but the last sent, and the server still reads: stop
		// the reader to see what it had.
		_ = conn.Close()
		got = <-ended
		t.Fatalf("the connection stayed open while the client sent %d bytes of %d, a byte every %v or slower (read timeout %v); answer so far %q",
			sent, bodyLen, slowPause, cfg.ReadTimeout, got.answer)
	}
	if !closedBy(got.err) || (writeErr != nil && !closedBy(writeErr)) {
		t.Fatalf("after %d bytes: read %v, write %v; want the server to close the connection (end of stream or reset); answer so far %q",
			sent, got.err, writeErr, got.answer)
	}
	// A reset may take the answer away with it (the client's kernel can drop
	// what it had not handed over yet); whatever arrived is the 408.
	if len(got.answer) > 0 && !strings.HasPrefix(string(got.answer), "HTTP/1.1 408") {
		t.Errorf("answer = %q, want 408", got.answer)
	}
	t.Logf("closed after %d bytes of the body (read: %v, write: %v), answer %d bytes", sent, got.err, writeErr, len(got.answer))
}

// TestRateLimit sends Burst+1 requests from one client: the last is refused
// with 429 before anything else is looked at, and another client is not
// affected.
func TestRateLimit(t *testing.T) {
	var rec recorder
	clk := newClock()
	cfg := rec.config("refs/heads/master")
	cfg.Now = clk.Now
	cfg.Burst = 3
	cfg.ClientKey = func(r *http.Request) string { return remoteHost(r) + "/" + r.URL.Query().Get("client") }
	srv := serve(t, cfg)

	send := func(client string) (int, Answer, http.Header) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/?client="+url.QueryEscape(client), nil)
		return do(t, srv.Client(), req)
	}
	var got []int
	for range cfg.Burst + 1 {
		status, _, _ := send("a")
		got = append(got, status)
	}
	status, a, h := send("a")
	got = append(got, status)
	if a.Result != Limited || h.Get("Retry-After") == "" {
		t.Errorf("refused answer = %+v, Retry-After %q; want %s with Retry-After", a, h.Get("Retry-After"), Limited)
	}
	other, _, _ := send("b")
	got = append(got, other)
	clk.Add(time.Second)
	again, _, _ := send("a")
	got = append(got, again)
	want := []int{405, 405, 405, 429, 429, 405, 405}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if n := rec.observed[[2]string{Unknown, Limited}]; n != 2 {
		t.Errorf("limited counted %d times, want 2", n)
	}
}

// TestLimiterBounded makes more clients than the bound: the number of
// buckets stays bounded.
func TestLimiterBounded(t *testing.T) {
	l := newLimiter(1, 2, 16)
	now := time.Now()
	for i := range 1000 {
		l.allow(fmt.Sprint("client", i), now)
		if len(l.m) > 16 {
			t.Fatalf("%d buckets, bound 16", len(l.m))
		}
	}
}

// TestBurstOfDeliveries sends 50 distinct authentic deliveries at once from
// one client: at most Burst of them ask for a tick, the rest are limited,
// and none waits for a tick: every answer arrives while the ticks asked for
// are still running (they end only when the test does).
func TestBurstOfDeliveries(t *testing.T) {
	var rec recorder
	c := acceptedCases(t)[GitHub]
	cfg := rec.config(c.Follows)
	clk := newClock()
	cfg.Now = clk.Now
	release := make(chan struct{})
	defer close(release)
	request := cfg.Request
	cfg.Request = func(ctx context.Context, provider string) uint64 {
		// The tick itself runs later, for longer than the whole test.
		go func() { <-release }()
		return request(ctx, provider)
	}
	srv := serve(t, cfg)
	base := c.body(t)

	var wg sync.WaitGroup
	statuses := make([]int, 50)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := bytes.Replace(base, []byte(`"after": "6113728f`), fmt.Appendf(nil, `"after": "%08x`, i), 1)
			h := c.header(testSecret, body)
			h.Set("X-GitHub-Delivery", fmt.Sprintf("burst-%d", i))
			statuses[i], _, _ = post(t, srv, h, bytes.NewReader(body))
		}()
	}
	wg.Wait()
	count := map[int]int{}
	for _, s := range statuses {
		count[s]++
	}
	want := map[int]int{http.StatusAccepted: DefaultBurst, http.StatusTooManyRequests: 50 - DefaultBurst}
	if diff := cmp.Diff(want, count); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if n := rec.tickCount(); n > DefaultBurst {
		t.Errorf("%d ticks asked for, at most %d", n, DefaultBurst)
	}
}

// TestInvalid sends authentic requests that recond cannot read.
func TestInvalid(t *testing.T) {
	cases := acceptedCases(t)
	type tc struct {
		name        string
		provider    string
		method      string
		contentType string
		body        []byte
		status      int
		result      string
	}
	var tcs []tc
	for p := range cases {
		tcs = append(tcs,
			tc{p + " bad JSON", p, http.MethodPost, "application/json", []byte(`{"ref": "refs/heads/`), 400, Invalid},
			tc{p + " empty body", p, http.MethodPost, "application/json", nil, 400, Invalid},
		)
	}
	tcs = append(tcs,
		tc{"github push without ref", GitHub, http.MethodPost, "application/json", []byte(`{"after":"0"}`), 400, Invalid},
		tc{"get", GitHub, http.MethodGet, "application/json", nil, 405, Invalid},
		tc{"text", GitHub, http.MethodPost, "text/plain", []byte(`{}`), 415, Invalid},
		tc{"no content type", GitHub, http.MethodPost, "", []byte(`{}`), 415, Invalid},
		tc{"form without payload", GitHub, http.MethodPost, "application/x-www-form-urlencoded", []byte(`a=b`), 400, Invalid},
	)
	for _, x := range tcs {
		t.Run(x.name, func(t *testing.T) {
			c := cases[x.provider]
			var rec recorder
			srv := serve(t, rec.config(c.Follows))
			h := c.header(testSecret, x.body)
			if x.contentType == "" {
				h.Del("Content-Type")
			} else {
				h.Set("Content-Type", x.contentType)
			}
			req, _ := http.NewRequest(x.method, srv.URL, bytes.NewReader(x.body))
			req.Header = h
			status, got, _ := do(t, srv.Client(), req)
			if status != x.status || got.Result != x.result {
				t.Errorf("answer = %d %+v, want %d %s", status, got, x.status, x.result)
			}
			if n := rec.tickCount(); n != 0 {
				t.Errorf("%d ticks asked for, want 0", n)
			}
			if diff := cmp.Diff(map[[2]string]int{{x.provider, x.result}: 1}, rec.observed); diff != "" {
				t.Errorf("observed (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFormEncoded sends GitHub's form content type: the signature covers the
// form, the event is read from its payload field.
func TestFormEncoded(t *testing.T) {
	var rec recorder
	c := acceptedCases(t)[GitHub]
	srv := serve(t, rec.config(c.Follows))
	form := []byte(url.Values{"payload": {string(c.body(t))}}.Encode())
	h := c.header(testSecret, form)
	h.Set("Content-Type", "application/x-www-form-urlencoded")
	status, got, _ := post(t, srv, h, bytes.NewReader(form))
	if status != http.StatusAccepted || got.Result != Accepted {
		t.Errorf("answer = %d %+v, want 202 %s", status, got, Accepted)
	}
}

// TestRequestContext checks that Request gets a context that outlives the
// request, so that it may keep the request's span without being cancelled.
func TestRequestContext(t *testing.T) {
	var rec recorder
	c := acceptedCases(t)[GitHub]
	cfg := rec.config(c.Follows)
	got := make(chan context.Context, 1)
	cfg.Request = func(ctx context.Context, provider string) uint64 { got <- ctx; return 7 }
	srv := serve(t, cfg)
	body := c.body(t)
	_, a, _ := post(t, srv, c.header(testSecret, body), bytes.NewReader(body))
	if a.Tick != 7 {
		t.Errorf("tick = %d, want 7", a.Tick)
	}
	ctx := <-got
	// Once the server is closed, every request it served has ended and its
	// context is cancelled: a context still tied to the request is done by
	// now, whatever the machine's speed.
	srv.Close()
	if ctx.Err() != nil {
		t.Errorf("Request's context is done after the request ended: %v", context.Cause(ctx))
	}
}

func TestNewRefusesIncompleteConfig(t *testing.T) {
	ok := Config{Secret: []byte("s"), Follows: func(string) bool { return true },
		Request: func(context.Context, string) uint64 { return 1 }}
	for name, mutate := range map[string]func(*Config){
		"no secret":      func(c *Config) { c.Secret = nil },
		"no follows":     func(c *Config) { c.Follows = nil },
		"no request":     func(c *Config) { c.Request = nil },
		"negative burst": func(c *Config) { c.Burst = -1 },
		"negative body":  func(c *Config) { c.MaxBody = -1 },
		"negative rate":  func(c *Config) { c.RatePerClient = rate.Limit(-1) },
	} {
		cfg := ok
		mutate(&cfg)
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
	if _, err := New(ok); err != nil {
		t.Errorf("complete config: %v", err)
	}
}
