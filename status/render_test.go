package status

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"recond.dev/recond/reconcile"
	"recond.dev/recond/reconcile/diff"
)

// TestNoSecretValue: a Secret's value, which the Result holds in the
// change's Desired object, in an operation's error and in the phase error,
// never reaches a page or the JSON; its mask does, on the tick page.
func TestNoSecretValue(t *testing.T) {
	p := newTestPage(testInfo, Options{}, converged(1), secretTick(2))
	never := []string{secretValue, unmaskedLeak}
	for _, tc := range []struct {
		path     string
		h        http.Handler
		wantMask bool
	}{
		{"/", p.Handler(), false},
		{"/ticks/2", p.Handler(), true},
		{"/api/v1/status", p.Handler(), false},
		{"/api/v1/ticks/2", p.TicksHandler(), true},
	} {
		t.Run(tc.path, func(t *testing.T) {
			code, body := get(t, tc.h, tc.path)
			if code != http.StatusOK {
				t.Fatalf("GET %s = %d: %s", tc.path, code, body)
			}
			for _, s := range never {
				if strings.Contains(body, s) {
					t.Errorf("GET %s shows %q:\n%s", tc.path, s, body)
				}
			}
			for _, mask := range []string{secretMaskA, secretMaskB} {
				// The page writes < as &lt;.
				if got := strings.Contains(body, mask) || strings.Contains(body, strings.ReplaceAll(strings.ReplaceAll(mask, "<", "&lt;"), ">", "&gt;")) ||
					strings.Contains(body, strings.ReplaceAll(strings.ReplaceAll(mask, "<", `\u003c`), ">", `\u003e`)); got != tc.wantMask {
					t.Errorf("GET %s shows mask %q: %v, want %v", tc.path, mask, got, tc.wantMask)
				}
			}
		})
	}
}

// TestSecretDataHidden: under a Secret's data and stringData only the
// diff's masks pass; anything else is hidden, and other kinds are shown as
// they are.
func TestSecretDataHidden(t *testing.T) {
	for _, tc := range []struct {
		kind, path string
		v          any
		want       string
	}{
		{"Secret", "data.password", secretMaskA, secretMaskA},
		{"Secret", "data.password", "cGxhaW4=", hidden},
		{"Secret", "stringData.token", "plain", hidden},
		{"Secret", "data", map[string]any{"a": secretMaskA, "b": "plain"}, `{"a":"` + secretMaskA + `","b":"` + hidden + `"}`},
		{"Secret", "data[x]", 3, hidden},
		{"Secret", "metadata.labels.app", "web", `"web"`},
		{"Secret", "dataset", "visible", `"visible"`},
		{"Secret", "type", "Opaque", `"Opaque"`},
		{"ConfigMap", "data.password", "plain", `"plain"`},
		{"ConfigMap", "data.big", strings.Repeat("x", 300), `"` + strings.Repeat("x", MaxValue-1) + "…"},
		{"Deployment", "spec.replicas", int64(3), "3"},
		{"Deployment", "spec.replicas", nil, ""},
	} {
		t.Run(tc.kind+"/"+tc.path, func(t *testing.T) {
			got := value(tc.kind, tc.path, tc.v)
			// encoding/json escapes < and > in strings.
			got = strings.NewReplacer(`\u003c`, "<", `\u003e`, ">").Replace(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("value (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCredentials: user information in the repository URL never appears;
// an error that names a URL is shown as the Result gives it.
func TestCredentials(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"https://deploy:ghp_t0ken@example.com/org/shop.git", "https://example.com/org/shop.git"},
		{"https://ghp_t0ken@example.com/org/shop.git", "https://example.com/org/shop.git"},
		{"ssh://git:ghp_t0ken@example.com:22/org/shop.git", "ssh://example.com:22/org/shop.git"},
		{"https://deploy:ghp t0ken@example.com/org/shop.git", "https://example.com/org/shop.git"},
		{"https://example.com/org/shop.git", "https://example.com/org/shop.git"},
		{"git@example.com:org/shop.git", "git@example.com:org/shop.git"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			info := testInfo
			info.Repo = tc.in
			p := newTestPage(info, Options{}, converged(1), failedRead(2))
			for _, path := range []string{"/", "/ticks/2", "/api/v1/status"} {
				_, body := get(t, p.Handler(), path)
				if strings.Contains(body, "ghp_t0ken") {
					t.Errorf("GET %s shows the token:\n%s", path, body)
				}
				if path != "/ticks/2" && !strings.Contains(body, tc.want) {
					t.Errorf("GET %s does not show the repository as %q", path, tc.want)
				}
				if !strings.Contains(body, "fetch https://example.com/org/shop.git: connection refused") {
					t.Errorf("GET %s does not show the read error as given", path)
				}
			}
		})
	}
}

// rows counts the timeline's rows and the objects table's rows.
var (
	tickRow   = regexp.MustCompile(`<tr><th scope="row"><a href="ticks/(\d+)">.*?<span class="o o-([a-z_]+)">`)
	objectRow = regexp.MustCompile(`<th scope="row">(config-\d+)</th>`)
)

func TestPagination(t *testing.T) {
	p := newTestPage(testInfo, Options{}, withObjects(converged(1), 250))
	for _, tc := range []struct {
		query           string
		code            int
		first, last     string
		rows            int
		nav, prev, next bool
	}{
		{"", http.StatusOK, "config-0000", "config-0099", 100, true, false, true},
		{"?page=2", http.StatusOK, "config-0100", "config-0199", 100, true, true, true},
		{"?page=3", http.StatusOK, "config-0200", "config-0249", 50, true, true, false},
		{"?page=9", http.StatusOK, "config-0200", "config-0249", 50, true, true, false},
		{"?page=0", http.StatusBadRequest, "", "", 0, false, false, false},
		{"?page=x", http.StatusBadRequest, "", "", 0, false, false, false},
	} {
		t.Run(tc.query, func(t *testing.T) {
			code, body := get(t, p.Handler(), "/"+tc.query)
			if code != tc.code {
				t.Fatalf("GET /%s = %d, want %d", tc.query, code, tc.code)
			}
			if code != http.StatusOK {
				return
			}
			m := objectRow.FindAllStringSubmatch(body, -1)
			if len(m) != tc.rows {
				t.Fatalf("%d object rows, want %d", len(m), tc.rows)
			}
			if m[0][1] != tc.first || m[len(m)-1][1] != tc.last {
				t.Errorf("rows %s..%s, want %s..%s", m[0][1], m[len(m)-1][1], tc.first, tc.last)
			}
			for _, c := range []struct {
				name string
				want bool
			}{{`aria-label="Object pages"`, tc.nav}, {`rel="prev"`, tc.prev}, {`rel="next"`, tc.next}} {
				if strings.Contains(body, c.name) != c.want {
					t.Errorf("page has %s: %v, want %v", c.name, !c.want, c.want)
				}
			}

			_, js := get(t, p.Handler(), "/api/v1/status"+tc.query)
			var s Status
			if err := json.Unmarshal([]byte(js), &s); err != nil {
				t.Fatal(err)
			}
			if len(s.Objects.Items) != tc.rows || s.Objects.Items[0].Name != tc.first || s.Objects.Total != 250 || s.Objects.Pages != 3 {
				t.Errorf("JSON objects: %d items from %s, total %d, pages %d", len(s.Objects.Items), s.Objects.Items[0].Name, s.Objects.Total, s.Objects.Pages)
			}
		})
	}
}

// TestRing: the ring keeps the last Size ticks, newest first; an evicted
// tick's page is gone, and the last success outlives its tick.
func TestRing(t *testing.T) {
	results := []*reconcile.Result{converged(1), converged(2), failedRead(3), failedRead(4), failedRead(5)}
	p := newTestPage(testInfo, Options{Size: 3,
		Progress: func() reconcile.Progress { return reconcile.Progress{Started: 5, Finished: 5} }}, results...)
	_, body := get(t, p.Handler(), "/api/v1/status")
	var s Status
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	for _, tk := range s.Ticks {
		ids = append(ids, tk.ID)
	}
	if diff := cmp.Diff([]uint64{5, 4, 3}, ids); diff != "" {
		t.Errorf("ticks (-want +got):\n%s", diff)
	}
	wantSuccess := t0.Add(2*time.Minute + 100*time.Millisecond)
	if s.LastSuccess == nil || !s.LastSuccess.Equal(wantSuccess) {
		t.Errorf("last success = %v, want %v (tick 2, evicted)", s.LastSuccess, wantSuccess)
	}
	_, html := get(t, p.Handler(), "/")
	var got []string
	for _, m := range tickRow.FindAllStringSubmatch(html, -1) {
		got = append(got, m[1]+" "+m[2])
	}
	if diff := cmp.Diff([]string{"5 failed", "4 failed", "3 failed"}, got); diff != "" {
		t.Errorf("timeline rows (-want +got):\n%s", diff)
	}
	for id, want := range map[string]int{"1": http.StatusNotFound, "2": http.StatusNotFound, "3": http.StatusOK, "5": http.StatusOK, "6": http.StatusNotFound} {
		if code, _ := get(t, p.Handler(), "/ticks/"+id); code != want {
			t.Errorf("GET /ticks/%s = %d, want %d", id, code, want)
		}
	}
}

// TestTicksHandler: a tick asked for is pending, then running, then done
// with its summary; one no longer kept is expired.
func TestTicksHandler(t *testing.T) {
	var prog reconcile.Progress
	p := newTestPage(testInfo, Options{Size: 2, Progress: func() reconcile.Progress { return prog }})
	type answer struct {
		code    int
		state   string
		outcome string
	}
	ask := func(id string) answer {
		code, body := get(t, p.TicksHandler(), "/api/v1/ticks/"+id)
		if code != http.StatusOK {
			return answer{code: code}
		}
		var ts TickState
		if err := json.Unmarshal([]byte(body), &ts); err != nil {
			t.Fatal(err)
		}
		a := answer{code: code, state: ts.State}
		if ts.Tick != nil {
			a.outcome = ts.Tick.Outcome
		}
		return a
	}
	steps := []struct {
		name string
		do   func()
		id   string
		want answer
	}{
		{"before the first tick", func() {}, "1", answer{200, StatePending, ""}},
		{"first tick running", func() { prog = reconcile.Progress{Started: 1, Running: true} }, "1", answer{200, StateRunning, ""}},
		{"next one pending", func() {}, "2", answer{200, StatePending, ""}},
		{"first tick done", func() {
			p.TickEnd(context.Background(), converged(1))
			prog = reconcile.Progress{Started: 1, Finished: 1}
		}, "1", answer{200, StateDone, "converged"}},
		{"recorded before Finished moves", func() {
			prog = reconcile.Progress{Started: 2, Finished: 1, Running: true}
			p.TickEnd(context.Background(), secretTick(2))
		}, "2", answer{200, StateDone, "failed"}},
		{"evicted", func() {
			p.TickEnd(context.Background(), converged(3))
			prog = reconcile.Progress{Started: 3, Finished: 3}
		}, "1", answer{200, StateExpired, ""}},
		{"not a number", func() {}, "one", answer{code: 400}},
		{"zero", func() {}, "0", answer{code: 400}},
	}
	for _, s := range steps {
		s.do()
		if diff := cmp.Diff(s.want, ask(s.id), cmp.AllowUnexported(answer{})); diff != "" {
			t.Errorf("%s: tick %s (-want +got):\n%s", s.name, s.id, diff)
		}
	}
}

// TestCaps: a tick that changed everything keeps MaxChanges changes and
// MaxFields fields and counts the rest.
func TestCaps(t *testing.T) {
	r := converged(1)
	for i := range MaxChanges + 20 {
		c := diff.Change{Kind: "ConfigMap", Name: fmt.Sprintf("c%d", i), Action: diff.Update}
		for j := range 5 {
			c.Fields = append(c.Fields, diff.FieldDiff{Path: fmt.Sprintf("data.k%d", j), Live: "a", Desired: "b"})
		}
		r.Changes = append(r.Changes, c)
		r.Ops = append(r.Ops, reconcile.Operation{Kind: "ConfigMap", Name: c.Name, Action: diff.Update})
	}
	d := newRecord(r, "", "").Detail
	fields, more := 0, 0
	for _, c := range d.Changes {
		fields += len(c.Fields)
		more += c.MoreFields
	}
	got := []int{len(d.Changes), d.MoreChanges, fields, more, len(d.Operations), d.MoreOperations}
	want := []int{MaxChanges, 20, MaxFields, MaxChanges*5 - MaxFields, MaxChanges, 20}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("changes, more, fields, more fields, ops, more ops (-want +got):\n%s", diff)
	}
	p := newTestPage(testInfo, Options{}, r)
	_, body := get(t, p.Handler(), "/ticks/1")
	if !strings.Contains(body, "and 20 more objects") || !strings.Contains(body, "and 20 more operations") {
		t.Error("tick page does not say how many changes and operations were left out")
	}
}

// TestGantt: one bar per phase that ran, as wide as its share of the tick.
func TestGantt(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    *reconcile.Result
		want []string
	}{
		{"five phases", converged(1), []string{"p-read width:10.0%", "p-observe width:20.0%", "p-diff width:5.0%", "p-apply width:60.0%", "p-health width:5.0%"}},
		{"failed read", failedRead(2), []string{"p-read p-fail width:100.0%"}},
		{"phases longer than the tick", func() *reconcile.Result { r := converged(3); r.Duration = time.Millisecond; return r }(),
			[]string{"p-read width:10.0%", "p-observe width:20.0%", "p-diff width:5.0%", "p-apply width:60.0%", "p-health width:5.0%"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bars, _ := gantt(tc.r)
			var got []string
			for _, b := range bars {
				got = append(got, b.Class+" "+string(b.Style))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("bars (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLinks: the trace link is there only for a sampled tick with a
// template; the commit link only with a template, and both are escaped.
func TestLinks(t *testing.T) {
	evil := `"><b>x</b>`
	for _, tc := range []struct {
		name      string
		info      Info
		ctx       context.Context
		rev       string
		wantTrace string
		wantRev   string
	}{
		{"sampled", testInfo, sampled(7), sha1, `href="http://jaeger:16686/trace/00000000000000000000000000000007"`,
			`href="https://example.com/org/shop/commit/` + sha1 + `"`},
		{"not sampled", testInfo, context.Background(), sha1, "", `href="https://example.com/org/shop/commit/` + sha1 + `"`},
		{"no templates", Info{Namespace: "shop"}, sampled(7), sha1, "", ""},
		{"escaped", testInfo, sampled(7), evil, `href="http://jaeger:16686/trace/00000000000000000000000000000007"`,
			`href="https://example.com/org/shop/commit/%22%3E%3Cb%3Ex%3C%2Fb%3E"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := New(tc.info, Options{Now: func() time.Time { return t0.Add(time.Hour) }})
			r := converged(1)
			r.Revision = tc.rev
			p.TickEnd(tc.ctx, r)
			_, index := get(t, p.Handler(), "/")
			_, tick := get(t, p.Handler(), "/ticks/1")
			for name, body := range map[string]string{"/": index, "/ticks/1": tick} {
				if got := strings.Contains(body, "jaeger"); got != (tc.wantTrace != "") {
					t.Errorf("%s has a trace link: %v, want %v", name, got, tc.wantTrace != "")
				}
				if tc.wantTrace != "" && !strings.Contains(body, tc.wantTrace) {
					t.Errorf("%s has no %s", name, tc.wantTrace)
				}
				if strings.Contains(body, "<b>") {
					t.Errorf("%s has the revision unescaped", name)
				}
			}
			for name, body := range map[string]string{"/": index, "/ticks/1": tick} {
				if got := strings.Contains(body, "/commit/"); got != (tc.wantRev != "") {
					t.Errorf("%s has a commit link: %v, want %v", name, got, tc.wantRev != "")
				}
				if tc.wantRev != "" && !strings.Contains(body, tc.wantRev) {
					t.Errorf("%s has no %s:\n%s", name, tc.wantRev, body)
				}
			}
		})
	}
}

// TestSelfContained: the page loads nothing from elsewhere and runs no
// script; the only links are its own and the commit and trace links.
func TestSelfContained(t *testing.T) {
	p := newTestPage(testInfo, Options{}, withObjects(converged(1), 150), secretTick(2))
	p.TickEnd(sampled(3), converged(3))
	attr := regexp.MustCompile(`\s(href|src|action|srcset)="([^"]*)"`)
	for _, path := range []string{"/", "/ticks/2", "/ticks/3", "/ticks/99"} {
		rec := getRecorder(t, p.Handler(), path)
		body := rec.Body.String()
		for _, bad := range []string{"<script", "<link", "<img", "<iframe", "@import", "url("} {
			if strings.Contains(body, bad) {
				t.Errorf("GET %s contains %s", path, bad)
			}
		}
		for _, m := range attr.FindAllStringSubmatch(body, -1) {
			if m[1] != "href" {
				t.Errorf("GET %s has %s=%q", path, m[1], m[2])
				continue
			}
			ok := !strings.Contains(m[2], "//") || strings.HasPrefix(m[2], "https://example.com/org/shop/commit/") ||
				strings.HasPrefix(m[2], "http://jaeger:16686/trace/")
			if !ok {
				t.Errorf("GET %s links to %q", path, m[2])
			}
		}
		if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
			t.Errorf("GET %s: Content-Security-Policy %q", path, csp)
		}
	}
}

// TestPageSize: with 100 ticks and 1,000 objects the main page stays under
// 100 KB (the objects are paginated).
func TestPageSize(t *testing.T) {
	_, body := get(t, benchPage().Handler(), "/")
	if len(body) >= 100<<10 {
		t.Errorf("GET / is %d bytes, want < 100 KB", len(body))
	}
	if n := len(objectRow.FindAllString(body, -1)); n != 100 {
		t.Errorf("GET / lists %d objects, want one page of 100", n)
	}
}

// TestConcurrentViews: views and tick ends at once (run with -race).
func TestConcurrentViews(t *testing.T) {
	p := newTestPage(testInfo, Options{Size: 5}, withObjects(converged(1), 300))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for id := uint64(2); id < 40; id++ {
			p.TickEnd(sampled(1), withObjects(secretTick(id), 300))
		}
	}()
	for i := 0; i < 40; i++ {
		for _, path := range []string{"/", "/?page=3", "/ticks/2", "/api/v1/status"} {
			if code, body := get(t, p.Handler(), path); code != http.StatusOK && code != http.StatusNotFound {
				t.Fatalf("GET %s = %d: %s", path, code, body)
			}
		}
	}
	<-done
}
