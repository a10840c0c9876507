package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/internal/testenv/kubeconfig"
	"recond.dev/recond/status"
)

// preInstallHook is a chart template of a pre-install hook (Helm's
// default delete policy: before-hook-creation).
func preInstallHook(kind, name, body string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: %s\nmetadata:\n  name: %s\n  annotations: {\"helm.sh/hook\": pre-install}\n%s", kind, name, body)
}

// A chart's hooks never replace what is not an earlier run of a hook of
// their instance, on the binary: instance b's ConfigMap, a hand-made
// Secret, an unowned claim and a ConfigMap marked recond.dev/reconcile:
// disabled are each named by a pre-install hook of instance a's chart.
// `recond sync --name a` fails in apply with reason invalid naming every
// refused hook, and leaves each object as it was (same UID, same data, the
// password still there) and nothing of a's revision written; `recond diff
// --name a` says, in text and JSON, what each hook would create and delete
// and that it would be refused. Without the write gate's hook rule the
// hooks deleted and replaced the four (the password gone, the claim left
// terminating, the tick timed out waiting for it) and diff showed no
// refusal.
func TestHooksNeverReplaceWhatIsNotTheirsOnTheBinary(t *testing.T) {
	cp.Require(t)
	ctx := context.Background()
	ns := cp.Namespace(t)
	kubeconfig := cp.WriteKubeConfig(t)
	args := func(name, repo string, more ...string) []string {
		return append([]string{"--name", name, "--repo", repo, "--namespace", ns, "--kubeconfig", kubeconfig,
			"--log-format", "json", "--cache-dir", t.TempDir()}, more...)
	}

	repoB := testenv.NewRepo(t)
	repoB.Commit("b's app", map[string]string{"shared.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared\ndata: {owner: b}\n"})
	if code, _, _ := recond(t, append([]string{"sync"}, args("b", repoB.URL())...)...); code != 0 {
		t.Fatalf("sync of instance b: exit %d", code)
	}
	core := cp.Client.CoreV1()
	if _, err := core.Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "handmade"},
		StringData: map[string]string{"password": "s3cret-by-hand"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := core.ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kept",
		Annotations: map[string]string{"recond.dev/reconcile": "disabled"}}, Data: map[string]string{"k": "by hand"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := core.PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-pvc"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// What each object is now: its UID and its data.
	snapshot := func() map[string]string {
		t.Helper()
		out := map[string]string{}
		for _, name := range []string{"shared", "kept"} {
			if c, err := core.ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{}); err == nil && c.DeletionTimestamp == nil {
				out["ConfigMap/"+name] = fmt.Sprintf("%s %v", c.UID, c.Data)
			}
		}
		if s, err := core.Secrets(ns).Get(ctx, "handmade", metav1.GetOptions{}); err == nil && s.DeletionTimestamp == nil {
			out["Secret/handmade"] = fmt.Sprintf("%s password=%q", s.UID, s.Data["password"])
		}
		if p, err := core.PersistentVolumeClaims(ns).Get(ctx, "data-pvc", metav1.GetOptions{}); err == nil && p.DeletionTimestamp == nil {
			out["PersistentVolumeClaim/data-pvc"] = fmt.Sprintf("%s %v", p.UID, p.Labels)
		}
		return out
	}
	before := snapshot()
	if len(before) != 4 || !strings.Contains(before["Secret/handmade"], `password="s3cret-by-hand"`) {
		t.Fatalf("the objects before a's sync: %v", before)
	}

	repoA := testenv.NewRepo(t)
	repoA.Commit("a's chart", map[string]string{
		"app/Chart.yaml":          "apiVersion: v2\nname: app\nversion: 1.0.0\n",
		"app/templates/app.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a-app\ndata: {x: \"1\"}\n",
		"app/templates/h1.yaml":   preInstallHook("ConfigMap", "shared", "data: {owner: a}\n"),
		"app/templates/h2.yaml":   preInstallHook("Secret", "handmade", "stringData: {password: taken}\n"),
		"app/templates/h3.yaml":   preInstallHook("ConfigMap", "kept", "data: {k: hook}\n"),
		"app/templates/h4.yaml":   preInstallHook("PersistentVolumeClaim", "data-pvc", "spec:\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 1Gi}}\n"),
		"app/templates/fine.yaml": preInstallHook("ConfigMap", "a-fine", "data: {k: v}\n"),
	})
	// A tick timeout well under recond's (a minute): without the rule, the
	// tick waits for the replaced claim, which its finalizer keeps, to go.
	argsA := args("a", repoA.URL(), "--path", "app", "--tick-timeout", "30s")
	refused := []string{"ConfigMap/shared", "ConfigMap/kept", "Secret/handmade", "PersistentVolumeClaim/data-pvc"}

	// recond diff: a line per hook, what it creates and deletes, and the
	// refusal; nothing is written.
	code, out, _ := recond(t, append([]string{"diff"}, argsA...)...)
	if code != 1 {
		t.Errorf("diff --name a: exit %d, want 1 (a-app to create)", code)
	}
	lines := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if m := regexp.MustCompile(`^hook (\S+) \(pre-install, weight 0\): creates ([^\s,;]+)`).FindStringSubmatch(l); m != nil && m[1] == m[2] {
			lines[m[1]] = l
		}
	}
	for _, h := range refused {
		l := lines[h]
		if !strings.Contains(l, ", after deleting the "+h+" an earlier run left; refused: ") {
			t.Errorf("diff --name a: no line saying hook %s would delete and replace %s and be refused; output:\n%s", h, h, out)
		}
	}
	if l := lines["ConfigMap/a-fine"]; l == "" || strings.Contains(l, "refused") || strings.Contains(l, "deleting") {
		t.Errorf("diff --name a: hook ConfigMap/a-fine line %q, want a plain create; output:\n%s", l, out)
	}
	code, out, _ = recond(t, append([]string{"diff", "--output", "json"}, argsA...)...)
	var plan diffJSON
	if err := json.Unmarshal([]byte(out), &plan); err != nil || code != 1 {
		t.Fatalf("diff --output json --name a: exit %d, %v:\n%s", code, err, out)
	}
	hooks := map[string]string{}
	for _, h := range plan.Hooks {
		if h.Refused != "" && h.Deletes == h.Hook {
			hooks[h.Hook] = h.Refused
		}
	}
	for _, h := range refused {
		if hooks[h] == "" {
			t.Errorf("diff --output json: hook %s not shown deleting %s and refused: %+v", h, h, plan.Hooks)
		}
	}

	// recond sync: the hooks are refused before any of them starts.
	code, _, errOut := recond(t, append([]string{"sync"}, argsA...)...)
	if code != 1 {
		t.Errorf("sync --name a: exit %d, want 1 (a failed tick)", code)
	}
	tick := tickLine(errOut)
	if !strings.Contains(tick, `"outcome":"failed"`) || !strings.Contains(tick, `"phase":"apply"`) || !strings.Contains(tick, `"reason":"invalid"`) {
		t.Errorf("sync --name a: tick line %s; want failed in phase apply with reason invalid", tick)
	}
	for _, h := range refused {
		if !strings.Contains(tick, "pre-install hook "+h+": refused to ") {
			t.Errorf("sync --name a: the tick line does not name the refused hook %s: %s", h, tick)
		}
	}
	if after := snapshot(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("a's hooks replaced what was not theirs:\nbefore %v\nafter  %v", before, after)
	}
	for _, name := range []string{"a-app", "a-fine"} {
		if _, err := core.ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
			t.Errorf("ConfigMap %s was written though a's pre-install hooks were refused", name)
		}
	}
	for _, what := range []struct{ kind, selector string }{
		{"ConfigMap", "recond.dev/instance=a"}, {"ConfigMap", "recond.dev/hook=a"}, {"Secret", "recond.dev/hook=a"},
	} {
		var n int
		if what.kind == "Secret" {
			l, err := core.Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: what.selector})
			if err != nil {
				t.Fatal(err)
			}
			n = len(l.Items)
		} else {
			l, err := core.ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: what.selector})
			if err != nil {
				t.Fatal(err)
			}
			n = len(l.Items)
		}
		if n != 0 {
			t.Errorf("%d %s(s) labelled %s: something of a's revision was written", n, what.kind, what.selector)
		}
	}
}

// writeValve is a plain-HTTP proxy between recond and the test bed's API
// server that watches the writes of the test's objects (ConfigMaps whose
// name starts with prefix; dry runs are not writes): it counts those that
// reach it and those the API server answered, and holds every one from the
// hold-th on until released. It also counts the answered writes of the
// instance's suspension (the inventory, by field manager recond-suspend).
// Every other request passes untouched.
type writeValve struct {
	prefix, suspension string
	url                string

	mu          sync.Mutex
	arrived     int // object writes that reached the valve
	answered    int // object writes the API server answered
	held        int // object writes held now
	suspensions int // suspension writes the API server answered
	hold        int // hold the object writes from the hold-th on (0: none)
	release     chan struct{}
}

// startWriteValve starts a valve in front of the test bed's API server for
// instance's objects named prefix*, and stops it when the test ends.
func startWriteValve(t *testing.T, prefix, instance string) *writeValve {
	t.Helper()
	target, err := url.Parse(cp.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := rest.TransportFor(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	v := &writeValve{prefix: "/configmaps/" + prefix, suspension: "/configmaps/recond-inventory-" + instance, release: make(chan struct{})}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport:     admin,
		FlushInterval: -1, // watches stream
		ErrorLog:      log.New(io.Discard, "", 0),
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		write := r.Method != http.MethodGet && r.URL.Query().Get("dryRun") == ""
		object := write && strings.Contains(r.URL.Path, v.prefix)
		suspension := write && strings.HasSuffix(r.URL.Path, v.suspension) && r.URL.Query().Get("fieldManager") == "recond-suspend"
		if object {
			v.mu.Lock()
			v.arrived++
			held := v.hold > 0 && v.arrived >= v.hold
			if held {
				v.held++
			}
			release := v.release
			v.mu.Unlock()
			if held {
				select {
				case <-release:
				case <-r.Context().Done():
				}
				v.mu.Lock()
				v.held--
				v.mu.Unlock()
			}
		}
		if !object && !suspension {
			rp.ServeHTTP(w, r)
			return
		}
		// Counted once the API server answered, before recond reads the
		// answer.
		p := *rp
		p.ModifyResponse = func(*http.Response) error {
			v.mu.Lock()
			defer v.mu.Unlock()
			if object {
				v.answered++
			} else {
				v.suspensions++
			}
			return nil
		}
		p.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		v.releaseHeld()
		srv.CloseClientConnections() // the watches too
		srv.Close()
	})
	v.url = srv.URL
	return v
}

// kubeConfig writes a kubeconfig for the valve (no credentials: it
// forwards as the test bed's admin).
func (v *writeValve) kubeConfig(t *testing.T) string {
	t.Helper()
	return kubeconfig.Write(t, &rest.Config{Host: v.url})
}

// holdFrom holds every object write from the n-th on.
func (v *writeValve) holdFrom(n int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.hold = n
}

// releaseHeld lets the writes held, and every later one, through.
func (v *writeValve) releaseHeld() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.hold > 0 {
		close(v.release)
		v.hold = 0
	}
}

// counts is what the valve saw so far: object writes arrived, answered
// and held now, and suspension writes answered.
func (v *writeValve) counts() (arrived, answered, held, suspensions int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.arrived, v.answered, v.held, v.suspensions
}

// waitFor polls cond until it holds (a minute at most: a guard against a
// hang, not a bound of the test).
func waitFor(t *testing.T, what string, log *testenv.SyncBuffer, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute; log:\n%s", what, log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A suspension asked of `recond run` while its tick writes stops that
// tick, on the binary: the writes of a revision of 320 ConfigMaps pass a
// valve that holds them from the 41st on, so that exactly
// --apply-concurrency (2) are in flight when POST /api/v1/suspend comes.
// Once the suspension's annotations reached the API server the valve lets
// them through. The answer comes after they returned, and says so
// (writesAfterRequest: the writes the valve saw answered after the request
// was sent, at most --apply-concurrency); no write of the revision reaches
// the API server after it, a manual fix stays, and the tick line, the
// status API and the suspended ticks show the suspension, not a failure.
// Resume writes the rest and heals the fix. Without the suspension held by
// the write gate the tick went on writing: a hundred writes and more after
// the request, and some after the answer.
func TestSuspendStopsTheTickThatIsWriting(t *testing.T) {
	cp.Require(t)
	ctx := context.Background()
	ns := cp.Namespace(t)
	const objects, concurrency, before = 320, 2, 40
	var manifests strings.Builder
	for i := range objects {
		fmt.Fprintf(&manifests, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: w-%04d\ndata:\n  k: v\n", i)
	}
	repo := testenv.NewRepo(t)
	repo.Commit("many", map[string]string{"many.yaml": manifests.String()})
	token := writeFile(t, "token", "s3cret\n")
	valve := startWriteValve(t, "w-", "recond")
	valve.holdFrom(before + 1)
	r := startRun(t, "1h", false, "--repo", repo.URL(), "--namespace", ns, "--kubeconfig", valve.kubeConfig(t),
		"--cache-dir", t.TempDir(), "--leader-elect=false", "--sync-token-file", token, "--tick-timeout", "5m",
		"--apply-concurrency", strconv.Itoa(concurrency))
	base := "http://" + r.addr

	// The tick writes: the first writes answered, then one held by each of
	// its --apply-concurrency calls.
	waitFor(t, "the tick's writes held", r.log, func() bool {
		_, _, held, _ := valve.counts()
		return held == concurrency
	})
	arrived0, answered0, _, _ := valve.counts()
	if arrived0 != before+concurrency || answered0 != before {
		t.Fatalf("before the suspension: %d writes arrived, %d answered; want %d and %d", arrived0, answered0, before+concurrency, before)
	}
	type reply struct {
		ans  suspendAnswer
		code int
		err  error
	}
	replies := make(chan reply, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, base+"/api/v1/suspend", strings.NewReader(`{"reason":"incident 9: hand-tuned w-0000","by":"carol","for":"1h"}`))
		req.Header.Set("Authorization", "Bearer s3cret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			replies <- reply{err: err}
			return
		}
		defer resp.Body.Close()
		var rp reply
		rp.code = resp.StatusCode
		rp.err = json.NewDecoder(resp.Body).Decode(&rp.ans)
		replies <- rp
	}()
	// The suspension is on the inventory: the process held its writes
	// before it wrote it. The writes in flight may now return.
	waitFor(t, "the suspension written", r.log, func() bool {
		_, _, _, s := valve.counts()
		return s > 0
	})
	valve.releaseHeld()
	var rp reply
	select {
	case rp = <-replies:
	case <-time.After(time.Minute): // a guard against a hang
		t.Fatalf("POST /api/v1/suspend did not answer; log:\n%s", r.log.String())
	}
	arrived1, answered1, _, _ := valve.counts()
	if rp.err != nil || rp.code != http.StatusOK || !rp.ans.Suspended || rp.ans.WritesAfterRequest == nil {
		t.Fatalf("POST /api/v1/suspend: %d %+v %v", rp.code, rp.ans, rp.err)
	}
	after := answered1 - answered0
	t.Logf("suspended with %d writes of %d answered; writesAfterRequest %d, %d answered after the request", answered0, objects, *rp.ans.WritesAfterRequest, after)
	if got := int(*rp.ans.WritesAfterRequest); got != after || got > concurrency {
		t.Errorf("writesAfterRequest %d; the valve saw %d writes answered after the request; want them equal, at most --apply-concurrency (%d)",
			got, after, concurrency)
	}

	// The tick the answer asked for comes after the writing tick ended:
	// that one stopped writing at the suspension and said so. A fix by hand
	// then stays.
	waitLog(t, r.log, "the tick of the answer", regexp.MustCompile(fmt.Sprintf(`"msg":"tick"[^\n]*"tick_id":%d,[^\n]*"suspended_by":"carol"`, rp.ans.Tick)))
	if arrived, _, _, _ := valve.counts(); arrived != arrived1 {
		t.Errorf("%d writes of the revision reached the API server after the suspension answered", arrived-arrived1)
	}
	if !strings.Contains(r.log.String(), `"msg":"suspended while writing: the tick stopped writing"`) {
		t.Error("the writing tick did not say it stopped at the suspension")
	}
	ticks := strings.Count(r.log.String(), `"msg":"tick"`)
	arrivedFix, written, _, _ := valve.counts()
	if _, err := cp.Client.CoreV1().ConfigMaps(ns).Patch(ctx, "w-0000", types.MergePatchType, []byte(`{"data":{"k":"by hand"}}`),
		metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	// The tick that sees the fix: the objects not written, and w-0000.
	sawFix := regexp.MustCompile(fmt.Sprintf(`"msg":"tick"[^\n]*"drifted":%d,`, objects-written+1))
	waitFor(t, "a tick that sees the fix by hand", r.log, func() bool {
		return sawFix.MatchString(r.log.String()[logAfterTicks(r.log.String(), ticks):])
	})
	if arrived, _, _, _ := valve.counts(); arrived != arrivedFix {
		t.Errorf("%d writes of the revision while suspended, after a fix by hand", arrived-arrivedFix)
	}
	if c, err := cp.Client.CoreV1().ConfigMaps(ns).Get(ctx, "w-0000", metav1.GetOptions{}); err != nil || c.Data["k"] != "by hand" {
		t.Errorf("the fix by hand was undone while suspended: %v %v", c.Data, err)
	}
	for _, l := range strings.Split(r.log.String(), "\n") {
		if strings.Contains(l, `"msg":"tick"`) && (strings.Contains(l, `"outcome":"failed"`) || !strings.Contains(l, `"suspended_by":"carol"`)) {
			t.Errorf("a tick while suspended: %.400s; want its suspension, not a failure", l)
		}
	}
	var st status.Status
	if err := json.Unmarshal([]byte(get(t, base+"/api/v1/status")), &st); err != nil {
		t.Fatal(err)
	}
	if s := st.Suspension; s == nil || s.By != "carol" || !strings.HasPrefix(s.Reason, "incident 9") {
		t.Errorf("GET /api/v1/status suspension %+v", s)
	}
	for _, tk := range st.Ticks {
		if tk.Failure != nil || tk.Outcome == "failed" {
			t.Errorf("GET /api/v1/status: tick %d %s %+v; want no failure while suspended", tk.ID, tk.Outcome, tk.Failure)
		}
	}

	// Resume: the rest written, the fix healed.
	req, _ := http.NewRequest(http.MethodPost, base+"/api/v1/resume", strings.NewReader(`{"by":"carol"}`))
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /api/v1/resume: %s", resp.Status)
	}
	waitFor(t, "every ConfigMap written after resume", r.log, func() bool {
		l, err := cp.Client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: "recond.dev/instance=recond"})
		if err != nil {
			return false
		}
		n := 0
		for _, c := range l.Items {
			if strings.HasPrefix(c.Name, "w-") && c.Data["k"] == "v" {
				n++
			}
		}
		return n == objects
	})
	if arrived, _, _, _ := valve.counts(); arrived-arrived1 < objects-answered1 {
		t.Errorf("after resume %d writes, want at least the %d not written", arrived-arrived1, objects-answered1)
	}
}
