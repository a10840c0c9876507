package status

import (
	"encoding/json"
	"html"
	"strings"
	"testing"

	"recond.dev/recond/reconcile"
	"recond.dev/recond/reconcile/diff"
)

// textTick changes a ConfigMap with values that hold HTML's special
// characters and a right-to-left override (U+202E), in a value, a key and
// a health message.
func textTick(id uint64) *reconcile.Result {
	r := withObjects(converged(id), 1)
	r.Outcome = reconcile.OutcomeApplied
	r.Counts = reconcile.Counts{Desired: 1, Drifted: 1, Updated: 1, Managed: 1}
	r.Changes = []diff.Change{{Kind: "ConfigMap", Name: "app", Action: diff.Update, Fields: []diff.FieldDiff{
		{Path: "data.query", Live: "a<b && c>d", Desired: `<script>alert("x")</script>`},
		{Path: "data.file\u202Etxt.exe", Live: "invoice\u202Efdp.exe", Desired: "x\u2066y\u2069z\u200F"},
	}}}
	r.Health.Objects[0].Message = "waiting for \u202Eecnalab"
	return r
}

// Values are shown as text: escaped as HTML only, never
// JSON-escaped first (no \u003c on the page), and bidirectional formatting
// characters are shown as their code points instead of reordering the
// text; the JSON API keeps the values as they are.
func TestValuesShownAsText(t *testing.T) {
	p := newTestPage(testInfo, Options{}, textTick(1))
	_, tick := get(t, p.Handler(), "/ticks/1")
	_, index := get(t, p.Handler(), "/")
	for _, want := range []string{
		html.EscapeString(`"a<b && c>d"`),
		`&#34;&lt;script&gt;alert(\&#34;x\&#34;)&lt;/script&gt;&#34;`,
		"data.file&lt;U+202E&gt;txt.exe",
		"invoice&lt;U+202E&gt;fdp.exe",
		"x&lt;U+2066&gt;y&lt;U+2069&gt;z&lt;U+200F&gt;",
	} {
		if !strings.Contains(tick, want) {
			t.Errorf("GET /ticks/1 does not show %q", want)
		}
	}
	if !strings.Contains(index, "waiting for &lt;U+202E&gt;ecnalab") {
		t.Errorf("GET / does not show the health message with its override visible")
	}
	for path, body := range map[string]string{"/ticks/1": tick, "/": index} {
		for _, bad := range []string{`\u003c`, `\u0026`, `\u003e`, "<script>", "\u202E", "\u2066", "\u200F"} {
			if strings.Contains(body, bad) {
				t.Errorf("GET %s holds %q", path, bad)
			}
		}
	}

	_, js := get(t, p.TicksHandler(), "/api/v1/ticks/1")
	var st TickState
	if err := json.Unmarshal([]byte(js), &st); err != nil || st.Tick == nil {
		t.Fatalf("GET /api/v1/ticks/1: %v\n%s", err, js)
	}
	d := st.Tick
	if got := d.Changes[0].Fields[0].Live; got != `"a<b && c>d"` {
		t.Errorf("JSON value = %q, want the text as it is", got)
	}
	if got := d.Changes[0].Fields[1].Path; got != "data.file\u202Etxt.exe" {
		t.Errorf("JSON path = %q, want it as it is", got)
	}
}

func TestVisibleBidi(t *testing.T) {
	for in, want := range map[string]string{
		"plain":                   "plain",
		"é ü € \u200E":            "é ü € &lt;U+200E&gt;",
		"\u061Ca\u202Ab\u2069":    "&lt;U+061C&gt;a&lt;U+202A&gt;b&lt;U+2069&gt;",
		"\u2028 \u2060 \u200B":    "\u2028 \u2060 \u200B", // not bidi controls
		"bad \xff utf-8 \u202E !": "bad \xff utf-8 &lt;U+202E&gt; !",
	} {
		if got := string(visibleBidi([]byte(in))); got != want {
			t.Errorf("visibleBidi(%q) = %q, want %q", in, got, want)
		}
	}
}

// A token in the repository URL's query or in its user information is
// never shown, on the page or in its JSON.
func TestRepositoryQueryDropped(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"https://gitlab.example.com/org/shop.git?private_token=glpat-s3cr3t", "https://gitlab.example.com/org/shop.git"},
		{"https://deploy:glpat-s3cr3t@gitlab.example.com/org/shop.git?a=1&private_token=glpat-s3cr3t#glpat-s3cr3t", "https://gitlab.example.com/org/shop.git"},
		{"https://gitlab.example.com/org/shop.git#glpat-s3cr3t", "https://gitlab.example.com/org/shop.git"},
		{"https://gitlab.example.com/org/shop.git?private_token=glpat-s3cr3t%zz", "https://gitlab.example.com/org/shop.git"},
	} {
		info := testInfo
		info.Repo = tc.in
		p := newTestPage(info, Options{}, converged(1))
		for _, path := range []string{"/", "/api/v1/status"} {
			_, body := get(t, p.Handler(), path)
			if strings.Contains(body, "glpat-s3cr3t") || strings.Contains(body, "private_token") {
				t.Errorf("%s: GET %s shows the token", tc.in, path)
			}
			if !strings.Contains(body, tc.want) {
				t.Errorf("%s: GET %s does not show the repository as %q", tc.in, path, tc.want)
			}
		}
	}
}
