package status

import (
	"errors"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	nethtml "golang.org/x/net/html"

	"recond.dev/recond/reconcile"
	"recond.dev/recond/reconcile/diff"
	"recond.dev/recond/reconcile/health"
	"recond.dev/recond/reconcile/optout"
	"recond.dev/recond/reconcile/source"
)

// hostile is a value that would run a script, or end its attribute and
// start an element, were it written unescaped; mark tells the fields
// apart.
func hostile(mark string) string {
	return `<script>` + mark + `</script>"'><img src=x onerror=` + mark + `>`
}

// hostileTick is a tick with every list the tick page shows filled, all
// with plain values.
func hostileTick() *reconcile.Result {
	r := withObjects(secretTick(1), 1)
	r.Chart = &source.Chart{Name: "shop", Version: "1.0.0", Values: []string{"prod.yaml"}}
	r.Suspension = &reconcile.Suspension{Until: t0.Add(3 * time.Hour), Reason: "freeze", By: "ops"}
	r.Ops[0].Err = errors.New("conflict")
	r.Rejected = []reconcile.Operation{{Kind: "ConfigMap", Name: "bad", Action: diff.Create, Fields: []string{"data.x"}, Err: errors.New("denied")}}
	r.Terminating, r.Equivalent, r.BackingOff = []string{"ConfigMap/t"}, []string{"ConfigMap/e"}, []string{"ConfigMap/b"}
	r.Skipped = []optout.Skip{{Kind: "ConfigMap", Name: "s", Reason: optout.Reason("disabled")}}
	r.Orphaned = []reconcile.ObjectRef{{Kind: "ConfigMap", Name: "o"}}
	return r
}

// TestHostileValuesEscaped: a hostile value in any field the pages show
// comes out escaped: it starts no element and no attribute, a link never
// takes a script URL, and the value is shown as text.
func TestHostileValuesEscaped(t *testing.T) {
	type setup struct {
		info *Info
		r    *reconcile.Result
	}
	for _, tc := range []struct {
		name string
		set  func(s setup, v string)
		// want is how the value must be shown; "" means
		// html.EscapeString of the value.
		want func(v string) string
	}{
		{name: "namespace", set: func(s setup, v string) { s.info.Namespace = v }},
		{name: "instance", set: func(s setup, v string) { s.info.Instance = v }},
		{name: "repo", set: func(s setup, v string) { s.info.Repo = v }},
		{name: "ref", set: func(s setup, v string) { s.info.Ref = v }},
		{name: "path", set: func(s setup, v string) { s.info.Path = v }},
		{name: "observe", set: func(s setup, v string) { s.info.Observe = v }},
		{name: "revision", set: func(s setup, v string) { s.r.Revision = v }},
		{name: "revision-linked", set: func(s setup, v string) {
			s.info.CommitURLTemplate = "https://example.com/c/{revision}"
			s.r.Revision = v
		}, want: func(v string) string {
			return `href="` + html.EscapeString("https://example.com/c/"+url.PathEscape(v)) + `"`
		}},
		{name: "trigger", set: func(s setup, v string) { s.r.Trigger = reconcile.Trigger(v) }},
		{name: "outcome", set: func(s setup, v string) { s.r.Outcome = reconcile.Outcome(v) }},
		{name: "health", set: func(s setup, v string) { s.r.Health.Status = health.Instance(v) }},
		{name: "chart-name", set: func(s setup, v string) { s.r.Chart.Name = v }},
		{name: "chart-version", set: func(s setup, v string) { s.r.Chart.Version = v }},
		{name: "chart-values", set: func(s setup, v string) { s.r.Chart.Values = []string{v} }},
		{name: "suspended-by", set: func(s setup, v string) { s.r.Suspension.By = v }},
		{name: "suspend-reason", set: func(s setup, v string) { s.r.Suspension.Reason = v }},
		{name: "phase", set: func(s setup, v string) { s.r.Phases[0].Phase = reconcile.Phase(v) }},
		{name: "phase-reason", set: func(s setup, v string) { s.r.Phases[3].Err.Reason = reconcile.Reason(v) }},
		{name: "failure", set: func(s setup, v string) {
			*s.r = *failedRead(1)
			s.r.Phases[0].Err.Err = errors.New(v)
		}},
		{name: "change-kind", set: func(s setup, v string) { s.r.Changes[0].Kind = v }},
		{name: "change-name", set: func(s setup, v string) { s.r.Changes[0].Name = v }},
		{name: "change-action", set: func(s setup, v string) { s.r.Changes[0].Action = diff.Action(v) }},
		{name: "field-path", set: func(s setup, v string) { s.r.Changes[0].Fields[0].Path = v }},
		// Values are JSON text: a </script> in one is text like any other.
		{name: "field-live", set: func(s setup, v string) { s.r.Changes[0].Fields[0].Live = "</script>" + v },
			want: func(v string) string {
				return html.EscapeString(`"</script>` + strings.ReplaceAll(v, `"`, `\"`) + `"`)
			}},
		{name: "field-desired", set: func(s setup, v string) {
			s.r.Changes[0].Fields[0].Desired = map[string]any{"</script>": v}
		}, want: func(v string) string {
			return html.EscapeString(`{"</script>":"` + strings.ReplaceAll(v, `"`, `\"`) + `"}`)
		}},
		{name: "op-kind", set: func(s setup, v string) { s.r.Ops[0].Kind = v }},
		{name: "op-name", set: func(s setup, v string) { s.r.Ops[0].Name = v }},
		{name: "op-action", set: func(s setup, v string) { s.r.Ops[0].Action = diff.Action(v) }},
		{name: "op-field", set: func(s setup, v string) { s.r.Ops[0].Fields = []string{"data.a", v} }},
		{name: "op-error", set: func(s setup, v string) { s.r.Ops[0].Err = errors.New(v) }},
		{name: "rejected", set: func(s setup, v string) { s.r.Rejected[0].Name = v }},
		{name: "terminating", set: func(s setup, v string) { s.r.Terminating = []string{v} }},
		{name: "equivalent", set: func(s setup, v string) { s.r.Equivalent = []string{v} }},
		{name: "backing-off", set: func(s setup, v string) { s.r.BackingOff = []string{v} }},
		{name: "skipped", set: func(s setup, v string) { s.r.Skipped[0].Name = v }},
		{name: "orphaned", set: func(s setup, v string) { s.r.Orphaned[0].Name = v }},
		{name: "object-kind", set: func(s setup, v string) { s.r.Health.Objects[0].Ref.Kind = v }},
		{name: "object-name", set: func(s setup, v string) { s.r.Health.Objects[0].Ref.Name = v }},
		{name: "object-revision", set: func(s setup, v string) { s.r.Health.Objects[0].Revision = v },
			want: func(v string) string {
				return "<code>" + html.EscapeString(v[:7]) + "</code></td><td><span class=\"h-current\">"
			}},
		{name: "object-health", set: func(s setup, v string) { s.r.Health.Objects[0].Status = health.Status(v) }},
		{name: "object-message", set: func(s setup, v string) { s.r.Health.Objects[0].Message = v }},
		// A URL template (checked by the flags, not by a library's
		// caller) with a script scheme or a quote: the link goes nowhere,
		// or the quote is percent-encoded.
		{name: "commit-url-script", set: func(s setup, v string) {
			s.info.CommitURLTemplate = "javascript:alert(1)//{revision}"
		}, want: func(string) string { return `<a href="#ZgotmplZ"><code>9f8e7d6</code></a>` }},
		{name: "trace-url-script", set: func(s setup, v string) {
			s.info.TraceURLTemplate = " JavaScript:alert(1)//{trace_id}"
		}, want: func(string) string { return `<a id="trace" href="#ZgotmplZ">` }},
		{name: "trace-url-quote", set: func(s setup, v string) {
			s.info.TraceURLTemplate = `http://jaeger/"><img src=x onerror=alert(1)>/{trace_id}`
		}, want: func(string) string {
			return `href="http://jaeger/%22%3e%3cimg%20src=x%20onerror=alert%281%29%3e/00000000000000000000000000000001"`
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := hostile(strings.ReplaceAll(tc.name, "-", ""))
			info := testInfo
			info.CommitURLTemplate = ""
			r := hostileTick()
			tc.set(setup{&info, r}, v)
			p := New(info, Options{Now: func() time.Time { return t0.Add(time.Hour) }})
			p.TickEnd(sampled(1), r)
			want := html.EscapeString(v)
			if tc.want != nil {
				want = tc.want(v)
			}
			var all strings.Builder
			for _, path := range []string{"/", "/ticks/1"} {
				code, body := get(t, p.Handler(), path)
				if code != http.StatusOK {
					t.Fatalf("GET %s = %d", path, code)
				}
				all.WriteString(body)
				if strings.Contains(body, v) {
					t.Errorf("GET %s holds the value unescaped", path)
				}
				for _, bad := range []string{"<script", "<img", "javascript:", "JavaScript:"} {
					if strings.Contains(body, bad) {
						t.Errorf("GET %s holds %q", path, bad)
					}
				}
				if err := checkElements(body); err != nil {
					t.Errorf("GET %s: %v", path, err)
				}
			}
			if !strings.Contains(all.String(), want) {
				t.Errorf("the pages do not show the value as %s", want)
			}
			// The JSON API escapes <, > and & (encoding/json's default).
			for _, path := range []string{"/api/v1/status", "/api/v1/ticks/1"} {
				h := p.Handler()
				if strings.Contains(path, "ticks") {
					h = p.TicksHandler()
				}
				if _, body := get(t, h, path); strings.ContainsAny(body, "<>") {
					t.Errorf("GET %s holds < or > unescaped", path)
				}
			}
		})
	}
}

// pageAttrs are the attributes the pages use.
var pageAttrs = map[string]bool{"lang": true, "charset": true, "name": true, "content": true, "http-equiv": true,
	"id": true, "class": true, "role": true, "href": true, "title": true, "datetime": true, "scope": true,
	"aria-label": true, "style": true, "rel": true}

var barStyle = regexp.MustCompile(`^width:\d+\.\d%$`)

// checkElements checks that page uses only the elements and attributes the
// pages use, a style only for a bar's width, and no href with a scheme
// other than http or https.
func checkElements(page string) error {
	var errs []error
	z := nethtml.NewTokenizer(strings.NewReader(page))
	for tt := z.Next(); tt != nethtml.ErrorToken; tt = z.Next() {
		if tt != nethtml.StartTagToken && tt != nethtml.SelfClosingTagToken {
			continue
		}
		tok := z.Token()
		if !knownElements[tok.Data] {
			errs = append(errs, fmt.Errorf("element <%s>", tok.Data))
		}
		for _, a := range tok.Attr {
			switch {
			case !pageAttrs[a.Key]:
				errs = append(errs, fmt.Errorf("<%s %s=%q>", tok.Data, a.Key, a.Val))
			case a.Key == "style" && !barStyle.MatchString(a.Val):
				errs = append(errs, fmt.Errorf("<%s style=%q>", tok.Data, a.Val))
			case a.Key == "href":
				if u, err := url.Parse(a.Val); err != nil || (u.Scheme != "" && u.Scheme != "http" && u.Scheme != "https") {
					errs = append(errs, fmt.Errorf("<%s href=%q>", tok.Data, a.Val))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// TestEscapers: text and attribute values, and URLs in an href, as
// html/template escaped them (but for '+', which needs no escape).
func TestEscapers(t *testing.T) {
	for _, tc := range []struct{ in, text, href string }{
		{"plain", "plain", "plain"},
		{`<a href="x">'&'</a>`, "&lt;a href=&#34;x&#34;&gt;&#39;&amp;&#39;&lt;/a&gt;", "%3ca%20href=%22x%22%3e%27&amp;%27%3c/a%3e"},
		{"nul\x00", "nul\uFFFD", "nul%00"},
		{"javascript:alert(1)", "javascript:alert(1)", "#ZgotmplZ"},
		{" javascript:x", " javascript:x", "#ZgotmplZ"},
		{"data:text/html,x", "data:text/html,x", "#ZgotmplZ"},
		{"vbscript:x", "vbscript:x", "#ZgotmplZ"},
		{"HTTPS://h/p?q=a b&r=%41%zz#f", "HTTPS://h/p?q=a b&amp;r=%41%zz#f", "HTTPS://h/p?q=a%20b&amp;r=%41%25zz#f"},
		{"mailto:a@b", "mailto:a@b", "mailto:a@b"},
		{"rel/a:b?x=y", "rel/a:b?x=y", "rel/a:b?x=y"},
		{"ü(1)+", "ü(1)+", "%c3%bc%281%29+"},
	} {
		var text, href strings.Builder
		hw{&text}.t(tc.in)
		hw{&href}.u(tc.in)
		if text.String() != tc.text {
			t.Errorf("text %q = %q, want %q", tc.in, text.String(), tc.text)
		}
		if href.String() != tc.href {
			t.Errorf("href %q = %q, want %q", tc.in, href.String(), tc.href)
		}
	}
}
