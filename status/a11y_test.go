package status

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// voidElements have no end tag.
var voidElements = map[string]bool{"area": true, "base": true, "br": true, "col": true, "embed": true, "hr": true,
	"img": true, "input": true, "link": true, "meta": true, "source": true, "track": true, "wbr": true}

// knownElements are the elements the pages may use.
var knownElements = map[string]bool{"html": true, "head": true, "body": true, "meta": true, "title": true, "style": true,
	"header": true, "main": true, "nav": true, "section": true, "h1": true, "h2": true, "h3": true, "h4": true,
	"p": true, "dl": true, "dt": true, "dd": true, "div": true, "span": true, "a": true, "code": true, "pre": true,
	"time": true, "table": true, "caption": true, "thead": true, "tbody": true, "tr": true, "th": true, "td": true,
	"ul": true, "li": true, "abbr": true, "b": true, "i": true, "strong": true}

// checkPage checks that page is well formed (every element known, every
// non-void element closed in order, no end tag for a void one) and the
// basics of accessibility: a lang, a title, one h1 and headings that never
// skip a level, header cells with a scope, links with text and an href,
// images with a label, unique ids.
func checkPage(page string) error {
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	z := html.NewTokenizer(strings.NewReader(page))
	var stack []string
	var doctype, lang bool
	var title strings.Builder
	titles, h1s, level := 0, 0, 0
	ids := map[string]bool{}
	type link struct {
		text strings.Builder
		href bool
	}
	var links []*link // open links
	attrs := func(t html.Token) map[string]string {
		m := map[string]string{}
		for _, a := range t.Attr {
			m[a.Key] = a.Val
		}
		return m
	}
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			if !errors.Is(z.Err(), io.EOF) {
				fail("tokenize: %v", z.Err())
			}
			break
		}
		t := z.Token()
		switch tt {
		case html.DoctypeToken:
			doctype = strings.EqualFold(t.Data, "html")
		case html.TextToken:
			if len(stack) > 0 && stack[len(stack)-1] == "title" {
				title.WriteString(t.Data)
			}
			for _, l := range links {
				l.text.WriteString(t.Data)
			}
		case html.SelfClosingTagToken, html.StartTagToken:
			name := t.Data
			a := attrs(t)
			if !knownElements[name] {
				fail("unknown element <%s>", name)
			}
			if tt == html.SelfClosingTagToken && !voidElements[name] {
				fail("<%s/> is not a void element", name)
			}
			if id, ok := a["id"]; ok {
				if ids[id] {
					fail("duplicate id %q", id)
				}
				ids[id] = true
			}
			switch name {
			case "html":
				lang = a["lang"] != ""
			case "title":
				titles++
			case "th":
				if s := a["scope"]; s != "col" && s != "row" {
					fail("<th> without scope=col|row (%q)", s)
				}
			case "a":
				links = append(links, &link{href: a["href"] != ""})
			case "img":
				if a["alt"] == "" {
					fail("<img> without alt")
				}
			case "h1", "h2", "h3", "h4", "h5", "h6":
				n, _ := strconv.Atoi(name[1:])
				if n == 1 {
					h1s++
				}
				if n > level+1 {
					fail("<%s> after h%d skips a level", name, level)
				}
				level = n
			}
			if a["role"] == "img" && a["aria-label"] == "" {
				fail("<%s role=img> without aria-label", name)
			}
			if !voidElements[name] && tt == html.StartTagToken {
				stack = append(stack, name)
			}
		case html.EndTagToken:
			name := t.Data
			if voidElements[name] {
				fail("end tag </%s> of a void element", name)
				continue
			}
			if len(stack) == 0 || stack[len(stack)-1] != name {
				fail("</%s> closes %v", name, stack)
				continue
			}
			stack = stack[:len(stack)-1]
			if name == "a" {
				l := links[len(links)-1]
				links = links[:len(links)-1]
				if strings.TrimSpace(l.text.String()) == "" {
					fail("link without text")
				}
				if !l.href {
					fail("link without href")
				}
			}
		}
	}
	if len(stack) > 0 {
		fail("unclosed %v", stack)
	}
	if !doctype {
		fail("no <!DOCTYPE html>")
	}
	if !lang {
		fail("<html> without lang")
	}
	if titles != 1 || strings.TrimSpace(title.String()) == "" {
		fail("%d titles, text %q", titles, title.String())
	}
	if h1s != 1 {
		fail("%d h1, want 1", h1s)
	}
	if _, err := html.Parse(strings.NewReader(page)); err != nil {
		fail("parse: %v", err)
	}
	return errors.Join(errs...)
}

// TestPagesValid runs checkPage over every kind of page.
func TestPagesValid(t *testing.T) {
	full := newTestPage(testInfo, Options{ObjectsPerPage: 10},
		withObjects(converged(1), 25), secretTick(2), failedRead(3))
	full.TickEnd(sampled(4), converged(4))
	empty := newTestPage(Info{}, Options{})
	for _, tc := range []struct {
		name string
		p    *Page
		path string
		code int
	}{
		{"index", full, "/", 200},
		{"index page 2", full, "/?page=2", 200},
		{"index empty", empty, "/", 200},
		{"tick with changes", full, "/ticks/2", 200},
		{"failed read", full, "/ticks/3", 200},
		{"tick with trace", full, "/ticks/4", 200},
		{"missing tick", full, "/ticks/99", 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(t, tc.p.Handler(), tc.path)
			if code != tc.code {
				t.Fatalf("GET %s = %d, want %d", tc.path, code, tc.code)
			}
			if err := checkPage(body); err != nil {
				t.Errorf("GET %s:\n%v\n%s", tc.path, err, body)
			}
		})
	}
}

// TestCheckPage: the checker finds what it is meant to find.
func TestCheckPage(t *testing.T) {
	page := func(body string) string {
		return `<!DOCTYPE html><html lang="en"><head><title>t</title></head><body><h1>x</h1>` + body + `</body></html>`
	}
	for _, tc := range []struct{ name, page, want string }{
		{"valid", page(`<h2>a</h2><table><tr><th scope="col">a</th></tr></table><a href="x">x</a>`), ""},
		{"unclosed", page(`<div><span>x</div>`), "closes"},
		{"void end tag", page(`<p>a</p></br>`), "void"},
		{"unknown element", page(`<blink>x</blink>`), "unknown element"},
		{"no lang", strings.Replace(page(""), ` lang="en"`, "", 1), "without lang"},
		{"no title", strings.Replace(page(""), `<title>t</title>`, "", 1), "0 titles"},
		{"skipped level", page(`<h3>a</h3>`), "skips a level"},
		{"two h1", page(`<h1>b</h1>`), "2 h1"},
		{"th without scope", page(`<table><tr><th>a</th></tr></table>`), "without scope"},
		{"link without text", page(`<a href="x"><span class="k"></span></a>`), "link without text"},
		{"image without label", page(`<div role="img"></div>`), "without aria-label"},
		{"duplicate id", page(`<p id="a">x</p><p id="a">y</p>`), "duplicate id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkPage(tc.page)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("checkPage = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("checkPage = %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// luminance is the relative luminance of a #rrggbb colour (WCAG 2.x).
func luminance(t *testing.T, hex string) float64 {
	t.Helper()
	var r, g, b int
	if _, err := fmt.Sscanf(hex, "#%02x%02x%02x", &r, &g, &b); err != nil {
		t.Fatalf("colour %q: %v", hex, err)
	}
	lin := func(c int) float64 {
		v := float64(c) / 255
		if v <= 0.03928 {
			return v / 12.92
		}
		return math.Pow((v+0.055)/1.055, 2.4)
	}
	return 0.2126*lin(r) + 0.7152*lin(g) + 0.0722*lin(b)
}

// TestContrast: every pair of colours drawn on each other has a contrast of
// at least 4.5:1, and the style sheet uses no colour outside the palette.
func TestContrast(t *testing.T) {
	ratio := func(a, b string) float64 {
		la, lb := luminance(t, a), luminance(t, b)
		return (max(la, lb) + 0.05) / (min(la, lb) + 0.05)
	}
	if r := ratio("#000000", "#ffffff"); math.Abs(r-21) > 0.01 {
		t.Fatalf("contrast of black on white = %.2f, want 21", r)
	}
	for _, c := range contrasts {
		if r := ratio(c.fg, c.bg); r < 4.5 {
			t.Errorf("%s: %s on %s has contrast %.2f:1, want >= 4.5:1", c.name, c.fg, c.bg, r)
		}
	}
	inPalette := map[string]bool{colBorder: true} // lines only
	for _, c := range contrasts {
		inPalette[c.fg], inPalette[c.bg] = true, true
	}
	s := string(css)
	for i := strings.IndexByte(s, '#'); i >= 0; i = strings.IndexByte(s, '#') {
		s = s[i:]
		hex := s[:min(7, len(s))]
		if !inPalette[hex] {
			t.Errorf("the style sheet uses %s, which no contrast pair checks", hex)
		}
		s = s[1:]
	}
	if strings.ContainsAny(strings.ReplaceAll(string(css), `"Segoe UI"`, ""), "ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
		t.Error("the style sheet has a placeholder left")
	}
}

// TestStatusCodes: what is not a page is refused.
func TestStatusCodes(t *testing.T) {
	p := newTestPage(testInfo, Options{}, converged(1))
	for path, want := range map[string]int{"/": 200, "/nope": 404, "/ticks/x": 400, "/ticks/0": 400, "/api/v1/status": 200,
		"/api/v1/status?page=-1": 400, "/api/v1/ticks/1": 404} {
		if code, _ := get(t, p.Handler(), path); code != want {
			t.Errorf("GET %s = %d, want %d", path, code, want)
		}
	}
	rec := getRecorder(t, p.Handler(), "/")
	if ct := rec.Header().Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type = %q", ct)
	}
	if code, _ := get(t, p.TicksHandler(), "/"); code != http.StatusNotFound {
		t.Errorf("TicksHandler GET / = %d, want 404", code)
	}
}
