package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"recond.dev/recond/internal/testenv"
)

// sopsRandom is a value no output holds by chance (hex, with a letter
// first so that YAML reads it as a string), the same at every run of t
// (testenv.FixtureText), so that what sops made of it is found again.
func sopsRandom(t *testing.T) string {
	t.Helper()
	return "s" + testenv.FixtureText(t)
}

// sopsURL is how the charts below embed a decrypted password in a longer
// string.
func sopsURL(password string) string { return "postgres://app:" + password + "@db/shop" }

// sopsChart is a chart at path app whose templates copy the decrypted
// values into objects that are not Secrets: a ConfigMap (inside a longer
// string, and base64 in binaryData), a Deployment's environment; and into
// a Secret.
var sopsChart = map[string]string{
	"app/Chart.yaml":  "apiVersion: v2\nname: shop\nversion: 1.0.0\n",
	"app/values.yaml": "mode: unset\ndb:\n  password: unset\ntoken: unset\n",
	"app/templates/configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n" +
		"  url: \"postgres://app:{{ .Values.db.password }}@db/shop\"\n  mode: {{ .Values.mode | quote }}\n" +
		"binaryData:\n  token: {{ .Values.token | b64enc }}\n",
	"app/templates/deployment.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 1\n" +
		"  selector:\n    matchLabels:\n      app: web\n  template:\n    metadata:\n      labels:\n        app: web\n" +
		"    spec:\n      containers:\n      - name: web\n        image: web:1\n        env:\n" +
		"        - name: DB_PASSWORD\n          value: {{ .Values.db.password | quote }}\n",
	"app/templates/secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: app\nstringData:\n  token: {{ .Values.token | quote }}\n",
}

// sopsValues is the plain values file: password and token are encrypted
// (--encrypted-regex), mode is not.
func sopsValues(password, token string) []byte {
	return []byte("db:\n  password: " + password + "\ntoken: " + token + "\nmode: blue\n")
}

// namespaceEvents returns the reason and note of every Event of ns.
func namespaceEvents(t *testing.T, ns string) string {
	t.Helper()
	l, err := cp.Client.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var notes strings.Builder
	for _, e := range l.Items {
		notes.WriteString(e.Reason + " " + e.Regarding.Kind + "/" + e.Regarding.Name + ": " + e.Note + "\n")
	}
	return notes.String()
}

// tickLine is the last "tick" line of a JSON log, or with an id that of
// tick id.
func tickLine(log string, id ...int) string {
	var line string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, `"msg":"tick"`) && (len(id) == 0 || strings.Contains(l, fmt.Sprintf(`"tick_id":%d,`, id[0]))) {
			line = l
		}
	}
	return line
}

// Values decrypted from a SOPS-encrypted Helm values file are never shown,
// wherever a template copies them (a ConfigMap's data, inside a longer
// string, base64 in binaryData, a Deployment's environment): the values
// are rotated, re-encrypted for another recipient, decrypted with a wrong
// key, drift in the cluster, and the keys file of a running recond changes
// (a manual tick renders the revision again), and every output is searched
// for every value (raw, base64, and the strings holding them): sync and
// diff's logs, diff in text and JSON, the run's log, its status page and
// /metrics, the exported spans and the namespace's Events.
func TestSOPSValuesNeverShown(t *testing.T) {
	sops := testenv.NewSOPS(t)
	idA, recipA := sops.Keygen()
	idB, recipB := sops.Keygen()
	idC, _ := sops.Keygen()
	keysA, keysB, keysC := sops.KeysFile(idA), sops.KeysFile(idB), sops.KeysFile(idC)
	pw1, pw2, pw3 := sopsRandom(t), sopsRandom(t), sopsRandom(t)
	tok1, tok2 := sopsRandom(t), sopsRandom(t)
	encrypt := func(password, token, recipient string) string {
		return string(sops.Encrypt("secrets/values.yaml", sopsValues(password, token),
			"--age", recipient, "--encrypted-regex", "^(password|token)$"))
	}

	repo := testenv.NewRepo(t)
	files := map[string]string{"secrets/values.yaml": encrypt(pw1, tok1, recipA)}
	for name, content := range sopsChart {
		files[name] = content
	}
	repo.Commit("chart and values for A", files)
	spansSent := collectOTLP(t)
	args := append(clusterArgs(t, repo.URL()), "--path", "app", "--helm-values", "secrets/values.yaml")
	ns := args[3]
	// with is the arguments of cmd with the keys file keys.
	with := func(cmd, keys string, more ...string) []string {
		a := append([]string{cmd}, more...)
		a = append(a, args...)
		return append(a, "--sops-age-keys-file", keys)
	}
	ctx := context.Background()
	var out bytes.Buffer // every output but the run's

	// 1. The first sync decrypts: the ConfigMap holds the password.
	code, _, errOut := recond(t, with("sync", keysA)...)
	out.WriteString(errOut)
	if code != 0 {
		t.Fatalf("first sync: exit %d", code)
	}
	cm, err := cp.Client.CoreV1().ConfigMaps(ns).Get(ctx, "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["url"] != sopsURL(pw1) || string(cm.BinaryData["token"]) != tok1 || cm.Data["mode"] != "blue" {
		t.Fatalf("the ConfigMap does not hold the decrypted values (data %d keys, binaryData %d keys)", len(cm.Data), len(cm.BinaryData))
	}

	// 2. Rotation: new values for A. diff shows what changed, masked; sync
	// logs the difference.
	repo.Commit("rotate", map[string]string{"secrets/values.yaml": encrypt(pw2, tok2, recipA)})
	code, text, errOut := recond(t, with("diff", keysA)...)
	out.WriteString(text + errOut)
	if code != 1 || !strings.Contains(text, "ConfigMap/app") || !strings.Contains(text, "data.url") ||
		!strings.Contains(text, "<secret sha256:") {
		t.Fatalf("diff: exit %d, output %q; want 1 and the ConfigMap's data.url, masked", code, text)
	}
	code, js, errOut := recond(t, with("diff", keysA, "--output", "json")...)
	out.WriteString(js + errOut)
	if code != 1 || !strings.Contains(js, `"data.url"`) || !strings.Contains(js, `"binaryData.token"`) {
		t.Fatalf("diff --output json: exit %d, output %q; want 1 and the changed fields", code, js)
	}
	code, _, errOut = recond(t, with("sync", keysA)...)
	out.WriteString(errOut)
	if code != 0 || !strings.Contains(errOut, `"msg":"difference"`) || !strings.Contains(errOut, `"object":"ConfigMap/app"`) {
		t.Fatalf("second sync: exit %d; want 0 and a difference line for ConfigMap/app", code)
	}

	// 3. The same values re-encrypted for B: a new revision that changes
	// nothing, and nothing is written.
	versions := func() string {
		t.Helper()
		cm, err := cp.Client.CoreV1().ConfigMaps(ns).Get(ctx, "app", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		d, err := cp.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s, err := cp.Client.CoreV1().Secrets(ns).Get(ctx, "app", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return "ConfigMap " + cm.ResourceVersion + ", Deployment " + d.ResourceVersion + ", Secret " + s.ResourceVersion
	}
	before := versions()
	repo.Commit("re-encrypt for B", map[string]string{"secrets/values.yaml": encrypt(pw2, tok2, recipB)})
	code, _, errOut = recond(t, with("sync", keysB)...)
	out.WriteString(errOut)
	line := tickLine(errOut)
	if code != 0 || !strings.Contains(line, `"created":0,"updated":0,"pruned":0`) || strings.Contains(errOut, `"msg":"difference"`) {
		t.Errorf("sync after re-encryption for B: exit %d, tick line %s; want 0 and nothing written", code, line)
	}
	if after := versions(); after != before {
		t.Errorf("re-encryption with the same values wrote: resourceVersions %s, then %s", before, after)
	}

	// 4. A wrong key: the read fails with reason auth, naming the file and
	// its recipient; nothing is written.
	code, _, errOut = recond(t, with("sync", keysC)...)
	out.WriteString(errOut)
	line = tickLine(errOut)
	for _, s := range []string{`"phase":"read"`, `"reason":"auth"`, "secrets/values.yaml", recipB} {
		if !strings.Contains(line, s) {
			t.Errorf("sync with a wrong key: the tick line does not say %s:\n%s", s, line)
		}
	}
	if code != 1 {
		t.Errorf("sync with a wrong key: exit %d, want 1", code)
	}
	if after := versions(); after != before {
		t.Errorf("a failed decryption wrote: resourceVersions %s, then %s", before, after)
	}

	// 5. recond run while the live ConfigMap drifts to a third password:
	// its first tick heals it. Then the keys file changes under it: a
	// manual tick renders the same revision again, and fails with the
	// wrong key; with the right key back, the next succeeds.
	patch := fmt.Sprintf(`{"data":{"url":%q}}`, sopsURL(pw3))
	if _, err := cp.Client.CoreV1().ConfigMaps(ns).Patch(ctx, "app", types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "kubectl"}); err != nil {
		t.Fatal(err)
	}
	keys := t.TempDir() + "/age.agekey"
	copyKeys := func(from string) {
		t.Helper()
		b, err := os.ReadFile(from)
		if err == nil {
			err = os.WriteFile(keys, b, 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	copyKeys(keysB)
	tokenFile := writeFile(t, "token", "sync-token\n")
	r := startRun(t, "1h", true, with("run", keys, "--sync-token-file", tokenFile, "--leader-elect=false")[1:]...)
	if !strings.Contains(r.log.String(), `"msg":"difference"`) || !strings.Contains(r.log.String(), `"object":"ConfigMap/app"`) {
		t.Errorf("the run's first tick logs no difference of the ConfigMap:\n%s", r.log.String())
	}
	if cm, err := cp.Client.CoreV1().ConfigMaps(ns).Get(ctx, "app", metav1.GetOptions{}); err != nil || cm.Data["url"] != sopsURL(pw2) {
		t.Errorf("the run did not heal the ConfigMap's url (%v)", err)
	}
	tickNow := func() (int, int) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		code := trigger(ctx, []string{"--url", "http://" + r.addr, "--token-file", tokenFile, "--wait", "--timeout", "1m"}, &stdout, &stderr)
		out.WriteString(stdout.String() + stderr.String())
		var id int
		if _, err := fmt.Sscanf(stdout.String(), "tick %d requested", &id); err != nil {
			t.Fatalf("recond trigger: %q %q", stdout.String(), stderr.String())
		}
		return id, code
	}
	copyKeys(keysC)
	if id, code := tickNow(); code != 1 || !strings.Contains(tickLine(r.log.String(), id), `"reason":"auth"`) {
		t.Errorf("tick %d with the keys file changed to a wrong key: trigger exit %d; want 1, reason auth:\n%s", id, code, tickLine(r.log.String(), id))
	}
	copyKeys(keysB)
	ticks, code := tickNow()
	if code != 0 {
		t.Errorf("tick %d with the right key back: trigger exit %d, want 0:\n%s", ticks, code, tickLine(r.log.String(), ticks))
	}
	pages := statusPages(t, r.addr, ticks)
	metricsBody := get(t, "http://"+r.addr+"/metrics")
	r.stop() // sends the Events and the spans
	logs := r.log.String()
	notes := namespaceEvents(t, ns)
	spans := spansSent()

	// 6. The password is rotated and moves out of the ConfigMap: a new
	// process, which never decrypted the live object's old password, still
	// masks the field it was written to (recond.dev/masked-fields).
	pw4 := sopsRandom(t)
	repo.Commit("rotated, and no password in the ConfigMap", map[string]string{
		"secrets/values.yaml": encrypt(pw4, tok2, recipB),
		"app/templates/configmap.yaml": strings.Replace(sopsChart["app/templates/configmap.yaml"],
			"postgres://app:{{ .Values.db.password }}@db/shop", "postgres://app@db/shop", 1)})
	code, text, errOut = recond(t, with("diff", keysB)...)
	out.WriteString(text + errOut)
	if code != 1 || !strings.Contains(text, "data.url") || !strings.Contains(text, "<secret sha256:") {
		t.Errorf("diff after the password left the ConfigMap: exit %d, output %q; want 1 and data.url, masked", code, text)
	}
	code, _, errOut = recond(t, with("sync", keysB)...)
	out.WriteString(errOut)
	if code != 0 || !strings.Contains(errOut, `"object":"ConfigMap/app"`) {
		t.Errorf("sync after the password left the ConfigMap: exit %d; want 0 and a difference line", code)
	}

	// 7. Every output is searched. It holds something to search: the
	// checks below can fail.
	if !strings.Contains(spans, "recond.tick") || !strings.Contains(spans, "recond.render") {
		t.Fatalf("the collector received no recond spans (%d bytes)", len(spans))
	}
	if !strings.Contains(pages, "ConfigMap") || !strings.Contains(pages, "data.url") || !strings.Contains(pages, "secret sha256:") {
		t.Errorf("the status page shows neither the ConfigMap nor its changed field, masked")
	}
	if !strings.Contains(notes, "Updated ConfigMap/app") || !strings.Contains(notes, "TickFailed") {
		t.Errorf("no Event about the ConfigMap, or no TickFailed:\n%s", notes)
	}
	if !strings.Contains(metricsBody, "recond_source_info{") {
		t.Errorf("no source info in /metrics")
	}
	var values []string
	for _, v := range []string{pw1, pw2, pw3, pw4, tok1, tok2, sopsURL(pw1), sopsURL(pw2), sopsURL(pw3)} {
		values = append(values, v, base64.StdEncoding.EncodeToString([]byte(v)))
	}
	for _, v := range []string{idA, idB, idC} {
		values = append(values, v, strings.TrimPrefix(v, "AGE-SECRET-KEY-1"))
	}
	for _, v := range values {
		for where, s := range map[string]string{"sync and diff output": out.String(), "the run's log": logs, "spans": spans,
			"metrics": metricsBody, "the status page": pages, "Events": notes} {
			if strings.Contains(s, v) {
				t.Errorf("%s contain the decrypted value or key %q", where, v)
			}
		}
	}
}

// configMapQuotingPolicy is quotingPolicy for ConfigMaps: it refuses a
// ConfigMap named "guarded" with a message quoting its data.url. It
// returns a function that removes the policy.
func configMapQuotingPolicy(t *testing.T, ns string) (remove func()) {
	t.Helper()
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "guarded"}, Data: map[string]string{"url": "probe-value"}}
	return denyPolicy(t, ns, "configmaps", "'url ' + object.data.url + ' is refused'", func(ctx context.Context) error {
		_, err := cp.Client.CoreV1().ConfigMaps(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}, "url probe-value is refused")
}

// An API server that quotes a decrypted Helm value copied into a ConfigMap
// (an admission policy refusing it, as a webhook may): creating it, and
// then updating it to a rotated value, fail naming the object and saying
// the message is not shown, and no output of recond (sync's and diff's
// logs, diff in text and JSON, the exported spans, the Events) holds a
// value.
func TestSOPSValueInAnAPIErrorIsConcealed(t *testing.T) {
	sops := testenv.NewSOPS(t)
	id, recipient := sops.Keygen()
	keys := sops.KeysFile(id)
	first, second := sopsRandom(t), sopsRandom(t)
	values := func(password string) string {
		return string(sops.Encrypt("secrets/values.yaml", []byte("db:\n  password: "+password+"\n"),
			"--age", recipient, "--encrypted-regex", "^(password|token)$"))
	}
	repo := testenv.NewRepo(t)
	repo.Commit("guarded", map[string]string{
		"app/Chart.yaml": "apiVersion: v2\nname: guarded\nversion: 1.0.0\n",
		"app/templates/guarded.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: guarded\ndata:\n" +
			"  url: \"postgres://app:{{ .Values.db.password }}@db/shop\"\n",
		"secrets/values.yaml": values(first),
	})
	args := append(clusterArgs(t, repo.URL()), "--path", "app", "--helm-values", "secrets/values.yaml", "--sops-age-keys-file", keys)
	ns := args[3]
	spansSent := collectOTLP(t)
	var out bytes.Buffer

	// refused syncs while the policy refuses the ConfigMap (its creation,
	// or its update), and runs recond diff.
	refused := func(what string) {
		t.Helper()
		code, _, errOut := recond(t, append([]string{"sync"}, args...)...)
		out.WriteString(errOut)
		line := tickLine(errOut)
		if code != 1 {
			t.Errorf("%s: sync exit %d, want 1 (the API server refuses the ConfigMap)", what, code)
		}
		for _, s := range []string{"ConfigMap/guarded", "Invalid (422)", "not shown: the object holds a decrypted value", `"outcome":"failed"`} {
			if !strings.Contains(line, s) {
				t.Errorf("%s: sync's tick line does not say %s:\n%s", what, s, line)
			}
		}
		code, text, errOut := recond(t, append([]string{"diff"}, args...)...)
		out.WriteString(text + errOut)
		if code != 1 || !strings.Contains(text, "ConfigMap/guarded") {
			t.Errorf("%s: diff exit %d, output %q; want 1 and the ConfigMap", what, code, text)
		}
		code, js, errOut := recond(t, append([]string{"diff", "--output", "json"}, args...)...)
		out.WriteString(js + errOut)
		if code != 1 || !strings.Contains(js, "guarded") {
			t.Errorf("%s: diff --output json exit %d, output %q; want 1 and the ConfigMap", what, code, js)
		}
	}

	// Creating the ConfigMap is refused.
	remove := configMapQuotingPolicy(t, ns)
	refused("create")

	// Without the policy, it is created, with the decrypted value.
	remove()
	code, _, errOut := recond(t, append([]string{"sync"}, args...)...)
	out.WriteString(errOut)
	if code != 0 {
		t.Fatalf("sync without the policy: exit %d", code)
	}
	cm, err := cp.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "guarded", metav1.GetOptions{})
	if err != nil || cm.Data["url"] != sopsURL(first) {
		t.Fatalf("the ConfigMap does not hold the decrypted value (%v)", err)
	}

	// A rotated value: updating it is refused.
	configMapQuotingPolicy(t, ns)
	repo.Commit("rotate", map[string]string{"secrets/values.yaml": values(second)})
	refused("update")

	notes := namespaceEvents(t, ns)
	spans := spansSent()
	if !strings.Contains(spans, "recond.tick") {
		t.Fatalf("the collector received no recond spans (%d bytes)", len(spans))
	}
	if !strings.Contains(notes, "ApplyFailed ConfigMap/guarded") || !strings.Contains(notes, "TickFailed") {
		t.Errorf("no ApplyFailed Event for the ConfigMap, or no TickFailed:\n%s", notes)
	}
	for _, p := range []string{first, second} {
		for _, v := range []string{p, base64.StdEncoding.EncodeToString([]byte(p)), sopsURL(p), base64.StdEncoding.EncodeToString([]byte(sopsURL(p)))} {
			for where, s := range map[string]string{"sync and diff output": out.String(), "spans": spans, "Events": notes} {
				if strings.Contains(s, v) {
					t.Errorf("%s contain the decrypted value %q", where, v)
				}
			}
		}
	}
}
