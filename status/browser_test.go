package status_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/internal/testenv/tools"
	"recond.dev/recond/reconcile"
	"recond.dev/recond/reconcile/cluster"
	"recond.dev/recond/reconcile/source"
	"recond.dev/recond/reconcile/source/renderer"
	"recond.dev/recond/status"
	"recond.dev/recond/tracing"
)

// cp is the control plane the package's tests share.
var cp *testenv.ControlPlane

func TestMain(m *testing.M) { os.Exit(testenv.RunTests(m, &cp)) }

// The Secret's values in Git and after someone edited it: neither may
// reach the browser, in clear or in base64.
const (
	gitPassword  = "s3cr3t-from-git-7f1c"
	livePassword = "tampered-in-cluster-92ad"
)

var manifests = map[string]string{
	"app.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: app
data:
  LOG_LEVEL: info
`,
	"db.yaml": `apiVersion: v1
kind: Secret
metadata:
  name: db
stringData:
  password: ` + gitPassword + `
`,
	"web.yaml": testenv.DeploymentYAML,
}

// browser returns a headless Chromium's context, or fails the test with
// what to install.
func browser(t *testing.T) context.Context {
	t.Helper()
	bin := tools.Find(t, tools.Chromium)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.WindowSize(1200, 900))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	ctx, cancel = context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1200, 900)); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	return ctx
}

// timelineRow is one row of the timeline as the browser shows it.
type timelineRow struct {
	Tick    string    `json:"tick"`
	Outcome string    `json:"outcome"`
	Phases  []string  `json:"phases"`
	Widths  []float64 `json:"widths"` // style widths, %
	Pixels  []float64 `json:"pixels"` // laid out widths, px
	Bar     float64   `json:"bar"`    // the bar's width, px
	Trace   string    `json:"trace"`
}

const readTimeline = `[...document.querySelectorAll('#timeline tbody tr')].map(tr => ({
  tick: tr.querySelector('th a').textContent,
  outcome: tr.querySelector('.o').textContent,
  phases: [...tr.querySelectorAll('.g i')].map(i => i.className),
  widths: [...tr.querySelectorAll('.g i')].map(i => parseFloat(i.style.width)),
  pixels: [...tr.querySelectorAll('.g i')].map(i => i.getBoundingClientRect().width),
  bar: tr.querySelector('.g').getBoundingClientRect().width,
  trace: (tr.querySelector('a[href*="/trace/"]') || {href: ''}).href,
}))`

// TestBrowser runs a reconciler against the test bed (a sync, a drift of a
// ConfigMap and a Secret, a broken commit, its fix) with the page as an
// observer, and checks what a browser shows: one timeline row per tick with
// its outcome, five phase bars filling a full tick, the trace links, and
// the Secret's masks but never its value.
func TestBrowser(t *testing.T) {
	cp.Require(t)
	ctx := browser(t)
	ns := cp.Namespace(t)
	repo := testenv.NewRepo(t)
	src, err := source.New(source.Config{Renderer: renderer.InProcess{}, URL: repo.URL(), Path: ".", CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	kube, err := cluster.New(cp.Config, ns)
	if err != nil {
		t.Fatal(err)
	}
	var rec *reconcile.Reconciler
	page := status.New(status.Info{
		Namespace: ns, Instance: "recond", Repo: src.DisplayURL(), Ref: "main", Path: ".", Observe: "list",
		Interval: time.Minute, CommitURLTemplate: "https://git.example.com/shop/commit/{revision}",
		TraceURLTemplate: "http://jaeger.example.com:16686/trace/{trace_id}",
	}, status.Options{Progress: func() reconcile.Progress { return rec.Progress() }})
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	cfg := reconcile.Config{Namespace: ns, Name: "recond", Path: ".", Prune: true, SelfHeal: true}
	rec = reconcile.New(cfg, src, kube, slog.New(slog.DiscardHandler), tracing.NewObserver(tp, ns, "recond"), page)

	var results []*reconcile.Result
	tick := func() {
		t.Helper()
		tctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		results = append(results, rec.Tick(tctx))
	}
	repo.Commit("shop", manifests)
	tick()
	dyn := dynamic.NewForConfigOrDie(cp.Config)
	for _, p := range []struct{ resource, name, patch string }{
		{"configmaps", "app", `{"data":{"LOG_LEVEL":"debug"}}`},
		{"secrets", "db", `{"data":{"password":"` + base64.StdEncoding.EncodeToString([]byte(livePassword)) + `"}}`},
	} {
		_, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: p.resource}).Namespace(ns).
			Patch(context.Background(), p.name, types.MergePatchType, []byte(p.patch), metav1.PatchOptions{FieldManager: "kubectl-edit"})
		if err != nil {
			t.Fatalf("drift %s/%s: %v", p.resource, p.name, err)
		}
	}
	tick()
	repo.Commit("broken", map[string]string{"broken.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: [unclosed\n"})
	tick()
	repo.Commit("fix", map[string]string{"broken.yaml": ""})
	tick()
	var outcomes []string
	for _, r := range results {
		outcomes = append(outcomes, string(r.Outcome))
	}
	want := []string{"applied", "applied", "failed", "converged"}
	if diff := cmp.Diff(want, outcomes); diff != "" {
		t.Fatalf("tick outcomes (-want +got):\n%s", diff)
	}

	srv := httptest.NewServer(page.Handler())
	t.Cleanup(srv.Close)
	shots := os.Getenv("RECOND_SCREENSHOTS_DIR")
	if shots == "" {
		shots = t.TempDir()
	}

	// The main page.
	load(t, ctx, srv.URL+"/")
	rows := eval[[]timelineRow](t, ctx, readTimeline)
	html := eval[string](t, ctx, `document.documentElement.outerHTML`)
	screenshot(t, ctx, filepath.Join(shots, "status-page.png"))
	if len(rows) != len(results) {
		t.Fatalf("%d timeline rows, want %d (one per tick)", len(rows), len(results))
	}
	for i, row := range rows {
		r := results[len(results)-1-i] // newest first
		if want := "#" + itoa(r.ID); row.Tick != want || row.Outcome != string(r.Outcome) {
			t.Errorf("row %d: tick %s %s, want %s %s", i, row.Tick, row.Outcome, want, r.Outcome)
		}
		if len(row.Phases) != len(r.Phases) {
			t.Errorf("row %d (%s): %d phase bars, want %d: %v", i, row.Tick, len(row.Phases), len(r.Phases), row.Phases)
		}
		full := r.Failure() == nil
		if full && len(row.Phases) != 5 {
			t.Errorf("row %d (%s): %d phase bars for a full tick, want 5", i, row.Tick, len(row.Phases))
		}
		var pct, px float64
		for _, w := range row.Widths {
			pct += w
		}
		for _, w := range row.Pixels {
			px += w
		}
		// The phases fill the tick but for the moments between them: as
		// much of the bar as their share of the tick's duration.
		var sum time.Duration
		for _, ph := range r.Phases {
			sum += ph.Duration
		}
		want := 100 * float64(sum) / float64(max(r.Duration, sum))
		if math.Abs(pct-want) > 0.5*float64(len(r.Phases))+0.1 {
			t.Errorf("row %d (%s): phase widths sum to %.1f%%, want %.1f%% (%v)", i, row.Tick, pct, want, row.Widths)
		}
		if math.Abs(px-row.Bar*pct/100) > 3 {
			t.Errorf("row %d (%s): phases laid out on %.0f px of a %.0f px bar, want %.0f", i, row.Tick, px, row.Bar, row.Bar*pct/100)
		}
		if !strings.HasPrefix(row.Trace, "http://jaeger.example.com:16686/trace/") || len(row.Trace) != len("http://jaeger.example.com:16686/trace/")+32 {
			t.Errorf("row %d (%s): trace link %q", i, row.Tick, row.Trace)
		}
	}
	if rows[1].Phases[0] != "p-read p-fail" {
		t.Errorf("the failed tick's bar is %v, want the read phase marked failed", rows[1].Phases)
	}
	noSecret(t, "/", html)

	// The drift's tick page: the Secret's change is shown masked.
	drift := itoa(results[1].ID)
	load(t, ctx, srv.URL+"/ticks/"+drift)
	secretRows := eval[[][]string](t, ctx, `[...document.querySelectorAll('h3')]
  .filter(h => h.textContent.includes('Secret/db'))
  .flatMap(h => [...h.nextElementSibling.querySelectorAll('tbody tr')].map(tr => [...tr.cells].map(c => c.textContent)))`)
	traceLink := eval[string](t, ctx, `document.getElementById('trace').href`)
	html = eval[string](t, ctx, `document.documentElement.outerHTML`)
	screenshot(t, ctx, filepath.Join(shots, "status-tick.png"))
	if len(secretRows) == 0 {
		t.Fatalf("tick %s shows no field of Secret/db:\n%s", drift, html)
	}
	masks := 0
	for _, cells := range secretRows {
		if len(cells) != 3 || !strings.Contains(cells[0], "password") {
			t.Errorf("tick %s: Secret/db row %q, want the password field", drift, cells)
			continue
		}
		for _, v := range cells[1:] {
			switch {
			case strings.HasPrefix(v, "<secret sha256:") && strings.HasSuffix(v, ">"):
				masks++
			case v != "(absent)":
				t.Errorf("tick %s: Secret/db %s shows %q, want a mask", drift, cells[0], v)
			}
		}
	}
	if masks == 0 {
		t.Errorf("tick %s shows no mask for Secret/db: %q", drift, secretRows)
	}
	if !strings.Contains(html, "LOG_LEVEL") || !strings.Contains(html, `"debug"`) {
		t.Errorf("tick %s does not show the ConfigMap's drift", drift)
	}
	noSecret(t, "/ticks/"+drift, html)

	// The trace link of the tick page is the tick's trace, as the JSON says.
	resp, err := http.Get(srv.URL + "/api/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st status.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	var traceID string
	for _, tk := range st.Ticks {
		if tk.ID == results[1].ID {
			traceID = tk.TraceID
		}
	}
	if traceID == "" || traceLink != "http://jaeger.example.com:16686/trace/"+traceID {
		t.Errorf("tick page trace link %q, trace id %q", traceLink, traceID)
	}

	// The failed tick's page has its error in full.
	failed := itoa(results[2].ID)
	load(t, ctx, srv.URL+"/ticks/"+failed)
	errText := eval[string](t, ctx, `document.querySelector('#error + pre').textContent`)
	if want := results[2].FailureText(); errText != want {
		t.Errorf("tick %s error %q, want %q", failed, errText, want)
	}
}

// load navigates to url and waits for the page to load.
func load(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("load %s: %v", url, err)
	}
}

// eval evaluates a script in the page (through DevTools: the page itself
// runs none).
func eval[T any](t *testing.T, ctx context.Context, script string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](script))
	if err != nil {
		t.Fatalf("evaluate %.60q: %v", script, err)
	}
	return v
}

// noSecret fails when html holds the Secret's value in any form.
func noSecret(t *testing.T, path, html string) {
	t.Helper()
	for _, v := range []string{gitPassword, livePassword} {
		for _, form := range []string{v, base64.StdEncoding.EncodeToString([]byte(v))} {
			if strings.Contains(html, form) {
				t.Errorf("%s shows the Secret's value %q", path, form)
			}
		}
	}
}

// screenshot writes a full-page PNG of the current page.
func screenshot(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s (%d bytes)", path, len(png))
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }
