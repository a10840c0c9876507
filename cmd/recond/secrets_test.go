package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"recond.dev/recond/internal/testenv"
)

// Credentials in the repository URL or in a token file are used to fetch,
// and appear nowhere else: not in logs, not in span attributes or events
// (the exported OTLP bytes are searched), not in metric labels.
func TestSecretsNeverLeak(t *testing.T) {
	const (
		password = "hunter2-url-s3cret"
		token    = "tok-file-s3cret-42"
		wrong    = "wrong-pass-s3cret"
	)
	repo := testenv.NewRepo(t)
	repo.Commit("cm", map[string]string{"cm.yaml": cmYAML})
	base := repo.ServeHTTP(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			u, p, ok := r.BasicAuth()
			if !ok || !(u == "deploy" && p == password || u == "git" && p == token) {
				w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	})
	spansSent := collectOTLP(t)

	withCreds := strings.Replace(base, "http://", "http://deploy:"+password+"@", 1)
	args := clusterArgs(t, withCreds)
	var logs bytes.Buffer

	// recond run with credentials in the URL: ticks succeed; scrape /metrics.
	r := startRun(t, "1h", true, args...)
	resp, err := http.Get("http://" + r.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metricsBody, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	pages := get(t, "http://"+r.addr+"/") + get(t, "http://"+r.addr+"/api/v1/status") + get(t, "http://"+r.addr+"/ticks/1")
	r.stop()
	logs.WriteString(r.log.String())

	// A token file, and a wrong password (a failing read whose error is
	// logged, recorded on the span and counted).
	tokenFile := t.TempDir() + "/token"
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokArgs := append([]string{"sync", "--git-token-file", tokenFile}, clusterArgs(t, base)...)
	code, _, errOut := recond(t, tokArgs...)
	if code != 0 {
		t.Fatalf("sync with a token file: exit %d", code)
	}
	logs.WriteString(errOut)
	code, _, errOut = recond(t, append([]string{"sync"}, clusterArgs(t, strings.Replace(base, "http://", "http://deploy:"+wrong+"@", 1))...)...)
	if code != 1 || !strings.Contains(errOut, `"reason":"auth"`) {
		t.Fatalf("sync with a wrong password: exit %d, want 1 with reason auth", code)
	}
	logs.WriteString(errOut)

	spans := spansSent()
	// The checks below can only fail if there is something to search.
	if !strings.Contains(spans, "recond.tick") || !strings.Contains(spans, "recond.read") {
		t.Fatalf("the collector received no recond spans (%d bytes)", len(spans))
	}
	if !strings.Contains(string(metricsBody), "recond_source_info{revision=") {
		t.Fatalf("no source info in /metrics")
	}
	if !strings.Contains(logs.String(), base) {
		t.Errorf("logs never name the repository %s", base)
	}
	for _, secret := range []string{password, token, wrong} {
		for where, text := range map[string]string{"logs": logs.String(), "spans": spans, "metrics": string(metricsBody), "the status page": pages} {
			if strings.Contains(text, secret) {
				t.Errorf("%s contain the secret %q", where, secret)
			}
		}
	}
}

// A Secret's values from Git are never shown: a Secret is synced and then
// changed in Git, with random values, and every output of recond is
// searched for them: the log lines of run and sync (the "difference" lines
// included), `recond diff` in text and JSON, the exported spans and
// /metrics. The diff still shows that a key changed.
func TestSecretValuesNeverShown(t *testing.T) {
	random := func() string {
		b := make([]byte, 12)
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		return hex.EncodeToString(b)
	}
	first, second, third := random(), random(), random()
	secret := func(password, token string) string {
		return "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\nstringData:\n  password: " + password +
			"\ndata:\n  token: " + base64.StdEncoding.EncodeToString([]byte(token)) + "\n"
	}
	repo := testenv.NewRepo(t)
	repo.Commit("secret", map[string]string{"secret.yaml": secret(first, first+"-t"), "cm.yaml": cmYAML})
	spansSent := collectOTLP(t)
	args := clusterArgs(t, repo.URL())
	var out bytes.Buffer

	code, _, errOut := recond(t, append([]string{"sync"}, args...)...)
	if code != 0 {
		t.Fatalf("first sync: exit %d", code)
	}
	out.WriteString(errOut)
	repo.Commit("rotate", map[string]string{"secret.yaml": secret(second, second+"-t")})
	code, text, errOut := recond(t, append([]string{"diff"}, args...)...)
	if code != 1 || !strings.Contains(text, "Secret/creds") {
		t.Fatalf("diff: exit %d, output %q; want 1 and the Secret", code, text)
	}
	out.WriteString(text + errOut)
	code, js, errOut := recond(t, append([]string{"diff", "--output", "json"}, args...)...)
	if code != 1 || !strings.Contains(js, `"stringData.password"`) || !strings.Contains(js, `"data.token"`) {
		t.Fatalf("diff --output json: exit %d, output %q; want the changed keys", code, js)
	}
	out.WriteString(js + errOut)
	code, _, errOut = recond(t, append([]string{"sync"}, args...)...)
	if code != 0 || !strings.Contains(errOut, `"msg":"difference"`) || !strings.Contains(errOut, "Secret/creds") {
		t.Fatalf("second sync: exit %d; want a difference line for the Secret", code)
	}
	out.WriteString(errOut)

	// recond run while the Secret drifts in the cluster (a third value),
	// so that a healed difference is logged too.
	repo.Commit("rotate again", map[string]string{"secret.yaml": secret(third, third+"-t")})
	r := startRun(t, "1h", true, args...)
	metricsBody := get(t, "http://"+r.addr+"/metrics")
	// The status page shows the tick's changes (the Secret's drift among
	// them) and the managed objects.
	pages := get(t, "http://"+r.addr+"/") + get(t, "http://"+r.addr+"/ticks/1") +
		get(t, "http://"+r.addr+"/api/v1/status") + get(t, "http://"+r.addr+"/api/v1/ticks/1")
	r.stop()
	if !strings.Contains(pages, "creds") || !strings.Contains(pages, "stringData.password") {
		t.Fatalf("the status page shows neither the Secret nor its changed key:\n%s", pages)
	}
	out.WriteString(r.log.String())
	spans := spansSent()
	if !strings.Contains(spans, "recond.tick") {
		t.Fatalf("the collector received no recond spans (%d bytes)", len(spans))
	}
	if !strings.Contains(out.String(), `"msg":"difference"`) {
		t.Fatal("no difference line to search")
	}
	for _, v := range []string{first, second, third} {
		for _, value := range []string{v, v + "-t", base64.StdEncoding.EncodeToString([]byte(v)), base64.StdEncoding.EncodeToString([]byte(v + "-t"))} {
			for where, s := range map[string]string{"logs and diff output": out.String(), "spans": spans, "metrics": metricsBody, "the status page": pages} {
				if strings.Contains(s, value) {
					t.Errorf("%s contain the Secret value %q", where, value)
				}
			}
		}
	}
}

// statusPages is the status page of the run at addr: its index, its JSON
// status, and every tick up to ticks, as a page and as JSON.
func statusPages(t *testing.T, addr string, ticks int) string {
	t.Helper()
	pages := get(t, "http://"+addr+"/") + get(t, "http://"+addr+"/api/v1/status")
	for i := 1; i <= ticks; i++ {
		pages += get(t, fmt.Sprintf("http://%s/ticks/%d", addr, i)) + get(t, fmt.Sprintf("http://%s/api/v1/ticks/%d", addr, i))
	}
	return pages
}

// collectOTLP points recond's OTLP/HTTP exporter at a collector that keeps
// every byte it receives, and returns what it received so far.
func collectOTLP(t *testing.T) func() string {
	t.Helper()
	var (
		mu   sync.Mutex
		otlp bytes.Buffer
	)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		otlp.Write(b)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(collector.Close)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "none")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		return otlp.String()
	}
}

// quotingPolicy installs a ValidatingAdmissionPolicy, bound to namespace
// ns, that refuses a Secret named "guarded" with a message quoting its
// password (base64, as CEL sees data), as an admission webhook may, and
// waits until the API server enforces it.
func quotingPolicy(t *testing.T, ns string) {
	t.Helper()
	probe := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "guarded"}, StringData: map[string]string{"password": "probe-value"}}
	denyPolicy(t, ns, "secrets", "'password ' + string(object.data.password) + ' is too weak'", func(ctx context.Context) error {
		_, err := cp.Client.CoreV1().Secrets(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}, base64.StdEncoding.EncodeToString([]byte("probe-value"))+" is too weak") // CEL sees data as base64
}

// denyPolicy installs a ValidatingAdmissionPolicy, bound to namespace ns,
// that refuses an object of the core/v1 resource named "guarded" with
// message (a CEL expression, which may quote the object), and waits until
// the API server enforces it: until probe (a dry-run create of such an
// object) fails with an error holding quoted. It returns a function that
// removes the policy and waits until probe succeeds again.
func denyPolicy(t *testing.T, ns, resource, message string, probe func(context.Context) error, quoted string) (remove func()) {
	t.Helper()
	ctx := context.Background()
	name := "recond-quotes-" + resource + "-" + ns
	fail := admissionregistrationv1.Fail
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{resource}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression:        "object.metadata.name != 'guarded'",
				MessageExpression: message,
			}},
		},
	}
	if _, err := cp.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}},
		},
	}
	if _, err := cp.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	del := func() {
		_ = cp.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = cp.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(context.Background(), name, metav1.DeleteOptions{})
	}
	t.Cleanup(del)
	// enforced waits until the API server does (want) or does not enforce
	// the policy.
	enforced := func(want bool) {
		t.Helper()
		deadline := time.Now().Add(time.Minute) // a guard against a hang
		for {
			err := probe(ctx)
			if refused := err != nil && strings.Contains(err.Error(), quoted); refused == want && (want || err == nil) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the policy is not (or still) enforced, want %t: %v", want, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	enforced(true)
	return func() {
		t.Helper()
		del()
		enforced(false)
	}
}

// A Git author's typos and an API server that quotes a value: errors from
// rendering and applying Secrets name the file, object and key, and no
// output of recond shows the value. Each commit fails a tick of `recond
// run` (asked for with `recond trigger --wait`), is shown by `recond diff`,
// and is followed by a good commit so that each failure sends its own
// TickFailed Event. Searched, raw and base64: the run's log, the trigger's
// and diff's output and log, the exported spans, /metrics, the status page
// (index, every tick, their JSON) and the namespace's Events.
func TestSecretValuesNeverInErrors(t *testing.T) {
	random := func() string {
		b := make([]byte, 12)
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		return "v" + hex.EncodeToString(b)
	}
	n, err := rand.Int(rand.Reader, new(big.Int).Exp(big.NewInt(10), big.NewInt(29), nil))
	if err != nil {
		t.Fatal(err)
	}
	digits := "9" + fmt.Sprintf("%029s", n.String())
	literal, envValue, admitted := random(), random(), random()
	secret := func(name, body string) string {
		return "apiVersion: v1\nkind: Secret\nmetadata:\n  name: " + name + "\n" + body
	}
	good := map[string]string{"kustomization.yaml": "resources:\n- cm.yaml\n", "cm.yaml": cmYAML}
	cases := []struct {
		name  string
		files map[string]string
		says  []string // in the log's tick line
	}{
		{"secretGenerator literal written with a colon", map[string]string{
			"kustomization.yaml": "resources:\n- cm.yaml\nsecretGenerator:\n- name: db\n  literals:\n  - user=admin\n  - password:" + literal + "\n"},
			[]string{"kustomization.yaml", "Secret/db", "literals[1]", `\"password…\"`}},
		{"unquoted long number in stringData", map[string]string{
			"kustomization.yaml": "resources:\n- cm.yaml\n- secret.yaml\n", "secret.yaml": secret("pins", "stringData:\n  pin: "+digits+"\n")},
			[]string{"secret.yaml", "Secret/pins", "stringData.pin: number"}},
		{"env file line written with a colon", map[string]string{
			"kustomization.yaml": "resources:\n- cm.yaml\nsecretGenerator:\n- name: db\n  envs:\n  - db.env\n",
			"db.env":             "DB_USER=admin\nDB_PASSWORD: " + envValue + "\n"},
			[]string{"kustomization.yaml", "Secret/db", "envs db.env line 2", `\"DB_PASSWORD…\"`}},
		{"API server quoting a value", map[string]string{
			"kustomization.yaml": "resources:\n- cm.yaml\n- guarded.yaml\n", "guarded.yaml": secret("guarded", "stringData:\n  password: "+admitted+"\n")},
			[]string{"Secret/guarded", "not shown"}},
	}

	repo := testenv.NewRepo(t)
	repo.Commit("good", good)
	args := clusterArgs(t, repo.URL())
	ns := args[3]
	quotingPolicy(t, ns)
	spansSent := collectOTLP(t)
	tokenFile := t.TempDir() + "/token"
	if err := os.WriteFile(tokenFile, []byte("sync-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := startRun(t, "1h", true, append([]string{"--sync-token-file", tokenFile, "--leader-elect=false"}, args...)...)
	var out bytes.Buffer // every output but the run's log
	// tickNow asks the run for a tick, waits for it and returns its id.
	tickNow := func() int {
		t.Helper()
		var stdout, stderr bytes.Buffer
		trigger(context.Background(), []string{"--url", "http://" + r.addr, "--token-file", tokenFile, "--wait", "--timeout", "1m"}, &stdout, &stderr)
		out.WriteString(stdout.String() + stderr.String())
		var id int
		if _, err := fmt.Sscanf(stdout.String(), "tick %d requested", &id); err != nil {
			t.Fatalf("recond trigger: %q %q", stdout.String(), stderr.String())
		}
		return id
	}
	ticks := 1
	for _, tc := range cases {
		repo.Commit(tc.name, tc.files)
		id := tickNow()
		// The tick's failure says what is wrong: the test searches
		// something real.
		var line string
		for _, l := range strings.Split(r.log.String(), "\n") {
			if strings.Contains(l, `"msg":"tick"`) && strings.Contains(l, fmt.Sprintf(`"tick_id":%d,`, id)) {
				line = l
			}
		}
		for _, s := range append(tc.says, `"outcome":"failed"`) {
			if !strings.Contains(line, s) {
				t.Errorf("%s: tick %d's line does not say %s:\n%s", tc.name, id, s, line)
			}
		}
		// recond diff fails where the tick did (2); a refusal by the API
		// server comes after the diff (1: the change is shown).
		want := 2
		if tc.name == "API server quoting a value" {
			want = 1
		}
		code, text, errOut := recond(t, append([]string{"diff"}, args...)...)
		if code != want {
			t.Errorf("%s: recond diff exit %d, want %d", tc.name, code, want)
		}
		out.WriteString(text + errOut)
		code, js, errOut := recond(t, append([]string{"diff", "--output", "json"}, args...)...)
		if code != want {
			t.Errorf("%s: recond diff --output json exit %d, want %d", tc.name, code, want)
		}
		out.WriteString(js + errOut)
		repo.Commit("good again", good)
		ticks = tickNow()
	}
	pages := statusPages(t, r.addr, ticks)
	metricsBody := get(t, "http://"+r.addr+"/metrics")
	r.stop() // sends the Events and the spans
	logs := r.log.String()

	var notes strings.Builder
	failed := 0
	l, err := cp.Client.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range l.Items {
		notes.WriteString(e.Reason + ": " + e.Note + "\n")
		if e.Reason == "TickFailed" {
			failed++
		}
	}
	if failed != len(cases) {
		t.Errorf("%d TickFailed Events, want %d:\n%s", failed, len(cases), notes.String())
	}
	spans := spansSent()
	if !strings.Contains(spans, "recond.render") || !strings.Contains(spans, "recond.validate") {
		t.Fatalf("the collector received no render or validate spans (%d bytes)", len(spans))
	}
	if !strings.Contains(pages, "Secret/guarded") || !strings.Contains(pages, "literals[1]") {
		t.Errorf("the status page shows none of the failures")
	}
	values := []string{literal, envValue, admitted, digits}
	for _, v := range values {
		for _, value := range []string{v, base64.StdEncoding.EncodeToString([]byte(v))} {
			for where, s := range map[string]string{"the run's log": logs, "trigger and diff output": out.String(), "spans": spans,
				"metrics": metricsBody, "the status page": pages, "Events": notes.String()} {
				if strings.Contains(s, value) {
					t.Errorf("%s contain the Secret value %q", where, value)
				}
			}
		}
	}
}
