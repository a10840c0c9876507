package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/status"
)

// startSuspendable runs `recond run` (watch mode, an hour's interval, no
// leader election) over a repository of one ConfigMap with the sync token
// s3cret, and waits until it applied the first revision. It returns the
// process, its namespace, its URL and the token's file.
func startSuspendable(t *testing.T) (r *running, ns, url, token string) {
	t.Helper()
	cp.Require(t)
	ns = cp.Namespace(t)
	repo := testenv.NewRepo(t)
	repo.Commit("cm", map[string]string{"cm.yaml": cmYAML})
	token = writeFile(t, "token", "s3cret\n")
	r = startRun(t, "1h", true, "--repo", repo.URL(), "--namespace", ns, "--kubeconfig", cp.WriteKubeConfig(t),
		"--cache-dir", t.TempDir(), "--leader-elect=false", "--sync-token-file", token, "--tick-timeout", "1m")
	waitEvent(t, ns, "RevisionApplied ConfigMap/recond-inventory-recond", r.log)
	return r, ns, "http://" + r.addr, token
}

// TestSuspendAndResumeEndToEnd runs `recond run` (watch mode) and drives it
// with `recond suspend` and `recond resume`, as an operator in an
// incident: the API refuses without the token and without a reason; while
// suspended, a manual change stays, and the page, `recond status`, the
// metrics, the tick line and an Event say who, why and until when; resume
// heals the change and says so with an Event.
func TestSuspendAndResumeEndToEnd(t *testing.T) {
	r, ns, url, token := startSuspendable(t)

	for _, tc := range []struct {
		name, auth, body string
		want             int
	}{
		{"no token", "", `{"reason":"x"}`, http.StatusUnauthorized},
		{"wrong token", "Bearer nope", `{"reason":"x"}`, http.StatusUnauthorized},
		{"no reason", "Bearer s3cret", `{"by":"alice"}`, http.StatusBadRequest},
		{"longer than --suspend-max", "Bearer s3cret", `{"reason":"x","for":"48h"}`, http.StatusBadRequest},
		{"unknown field", "Bearer s3cret", `{"reason":"x","until":"never"}`, http.StatusBadRequest},
	} {
		req, _ := http.NewRequest(http.MethodPost, url+"/api/v1/suspend", strings.NewReader(tc.body))
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %s, want %d", tc.name, resp.Status, tc.want)
		}
	}
	if l := metricLine(t, r.addr, "recond_suspended"); l != "recond_suspended 0" {
		t.Fatalf("before any suspension: %q, want recond_suspended 0", l)
	}

	var stdout, stderr bytes.Buffer
	if code := suspendCommand(context.Background(), false, []string{"--url", url, "--token-file", token,
		"--reason", "incident 7: hand-tuned c", "--for", "2h", "--by", "alice"}, &stdout, &stderr); code != 0 {
		t.Fatalf("recond suspend: exit %d, %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "suspended until") || !strings.Contains(stdout.String(), "by alice: incident 7") {
		t.Errorf("recond suspend says %q", stdout.String())
	}
	waitEvent(t, ns, "Suspended ConfigMap/recond-inventory-recond", r.log)
	waitLog(t, r.log, "the tick line of the suspension", regexp.MustCompile(`"suspended_by":"alice"`))

	// A manual fix stays: the watch asks for ticks, which write nothing.
	ticks := strings.Count(r.log.String(), `"msg":"tick"`)
	patch := []byte(`{"data":{"k":"by hand"}}`)
	if _, err := cp.Client.CoreV1().ConfigMaps(ns).Patch(context.Background(), "c", types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(r.log.String()[logAfterTicks(r.log.String(), ticks):], `"outcome":"out_of_sync"`) {
		if time.Now().After(deadline) {
			t.Fatalf("no out_of_sync tick after the manual change; log:\n%s", r.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if cm, _ := cp.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "c", metav1.GetOptions{}); cm.Data["k"] != "by hand" {
		t.Fatalf("the manual change was undone while suspended: %v", cm.Data)
	}

	if l := metricLine(t, r.addr, "recond_suspended"); l != "recond_suspended 1" {
		t.Errorf("suspended: %q, want recond_suspended 1", l)
	}
	l := metricLine(t, r.addr, "recond_suspended_until_timestamp_seconds")
	until, _ := strconv.ParseFloat(strings.TrimPrefix(l, "recond_suspended_until_timestamp_seconds "), 64)
	if left := time.Until(time.Unix(int64(until), 0)); left < 119*time.Minute || left > 2*time.Hour {
		t.Errorf("%q: ends in %s, want 2h", l, left)
	}
	var st status.Status
	if err := json.Unmarshal([]byte(get(t, url+"/api/v1/status")), &st); err != nil {
		t.Fatal(err)
	}
	if s := st.Suspension; s == nil || s.By != "alice" || s.Reason != "incident 7: hand-tuned c" || s.RemainingSeconds < 7100 {
		t.Errorf("GET /api/v1/status suspension %+v", s)
	}
	if page := get(t, url+"/"); !strings.Contains(page, `id="suspended"`) || !strings.Contains(page, "incident 7: hand-tuned c") {
		t.Errorf("the status page has no suspension banner:\n%s", page)
	}
	stdout.Reset()
	if code := printStatus(context.Background(), []string{"--url", url}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "SUSPENDED") ||
		!strings.Contains(stdout.String(), "by alice: incident 7") {
		t.Errorf("recond status: exit %d\n%s", code, stdout.String())
	}

	stdout.Reset()
	if code := suspendCommand(context.Background(), true, []string{"--url", url, "--token-file", token, "--by", "bob"}, &stdout, &stderr); code != 0 {
		t.Fatalf("recond resume: exit %d, %s", code, stderr.String())
	}
	waitEvent(t, ns, "Resumed ConfigMap/recond-inventory-recond", r.log)
	deadline = time.Now().Add(time.Minute)
	for {
		cm, err := cp.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "c", metav1.GetOptions{})
		if err == nil && cm.Data["k"] == "v" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not healed after resume: %v %v; log:\n%s", cm.Data, err, r.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if l := metricLine(t, r.addr, "recond_suspended"); l != "recond_suspended 0" {
		t.Errorf("resumed: %q, want recond_suspended 0", l)
	}
	evs, err := cp.Client.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var notes []string
	for _, e := range evs.Items {
		if e.Reason == "Suspended" || e.Reason == "Resumed" {
			notes = append(notes, e.Reason+": "+e.Note)
		}
	}
	joined := strings.Join(notes, "\n")
	if !strings.Contains(joined, "Suspended: suspended by alice until") || !strings.Contains(joined, "Resumed: resumed by bob (suspended by alice: incident 7") {
		t.Errorf("Events of the suspension:\n%s", joined)
	}
}

// logAfterTicks is the offset in log just after its n-th tick line.
func logAfterTicks(log string, n int) int {
	off := 0
	for range n {
		i := strings.Index(log[off:], `"msg":"tick"`)
		if i < 0 {
			return len(log)
		}
		off += i + 1
	}
	return off
}

// A standby that takes over finds the suspension on the inventory and
// stays suspended: the suspension is asked of the standby (any process
// answers), the leader stops, the new leader's ticks write nothing until
// recond resume.
func TestStandbyTakesOverSuspended(t *testing.T) {
	cp.Require(t)
	ns := cp.Namespace(t)
	kubeconfig := cp.WriteKubeConfig(t)
	repo := testenv.NewRepo(t)
	repo.Commit("c", map[string]string{"cm.yaml": cmYAML})
	token := writeFile(t, "token", "t0ken")
	args := func() []string {
		return append([]string{"--repo", repo.URL(), "--namespace", ns, "--kubeconfig", kubeconfig, "--cache-dir", t.TempDir(), "--tick-timeout", "30s",
			"--sync-token-file", token}, leaseArgs...)
	}
	a := startRun(t, "1s", true, args()...)
	b := startRun(t, "1s", false, args()...)
	waitLog(t, b.log, "the standby's wait", regexp.MustCompile(`"msg":"standby: another process holds the lease; waiting to take over"`))

	var out, errOut bytes.Buffer
	if code := suspendCommand(context.Background(), false, []string{"--url", "http://" + b.addr, "--token-file", token,
		"--reason", "asked of the standby", "--by", "frank"}, &out, &errOut); code != 0 {
		t.Fatalf("recond suspend to the standby: exit %d, %s", code, errOut.String())
	}
	waitLog(t, a.log, "the leader's suspended tick", regexp.MustCompile(`"suspended_by":"frank"`))
	repo.Commit("change", map[string]string{"cm.yaml": strings.Replace(cmYAML, "k: v", "k: new", 1)})
	if code := a.stop(); code != 0 {
		t.Fatalf("leader exit %d", code)
	}
	waitLog(t, b.log, "the new leader's suspended tick with the new revision's difference",
		regexp.MustCompile(`"msg":"tick"[^\n]*"outcome":"out_of_sync"[^\n]*"suspended_by":"frank"`))
	if c, _ := cp.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "c", metav1.GetOptions{}); c.Data["k"] != "v" {
		t.Fatalf("the new leader wrote while suspended: %v", c.Data)
	}
	if code := suspendCommand(context.Background(), true, []string{"--url", "http://" + b.addr, "--token-file", token}, &out, &errOut); code != 0 {
		t.Fatalf("recond resume: exit %d, %s", code, errOut.String())
	}
	deadline := time.Now().Add(time.Minute) // a guard against a hang
	for {
		if c, _ := cp.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "c", metav1.GetOptions{}); c.Data["k"] == "new" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not applied after resume; log:\n%s", b.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
