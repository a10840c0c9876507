package reconcile_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"recond.dev/recond/internal/redact"
	"recond.dev/recond/internal/redact/redacttest"
	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/reconcile"
	"recond.dev/recond/status"
)

// decrypting is a source that says it decrypted values, as it does those
// of a chart's SOPS-encrypted values file: the reconciler masks them as it
// masks whatever its source decrypted.
type decrypting struct {
	reconcile.Source
	mu     sync.Mutex
	values []string
}

func (d *decrypting) SensitiveValues(string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.values)
}

func (d *decrypting) KeysChanged(string) bool { return false }

func (d *decrypting) decrypted(shapes []redacttest.Shape) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.values = d.values[:0]
	for _, sh := range shapes {
		d.values = append(d.values, sh.Value)
	}
}

// shapeConfigMap is a ConfigMap (as JSON, which holds any value) into
// which a chart's templates copied a decrypted value in every form they
// write one: as it is, b64enc (with a newline too), toJson, quote, nindent
// (a multi-line value) and a number as Helm prints it.
func shapeConfigMap(t *testing.T, name string, sh redacttest.Shape) string {
	t.Helper()
	v := strings.TrimSpace(sh.Value)
	js, _ := json.Marshal(v)
	data := map[string]string{
		"raw": sh.Value, "b64": base64.StdEncoding.EncodeToString([]byte(v)), "b64nl": base64.StdEncoding.EncodeToString([]byte(v + "\n")),
		"json": `{"pw":` + string(js) + `}`, "quoted": strconv.Quote(v),
	}
	if strings.Contains(v, "\n") {
		data["conf"] = "key: |\n    " + strings.ReplaceAll(v, "\n", "\n    ") + "\n"
	}
	if sh.Number {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Fatal(err)
		}
		data["float"] = fmt.Sprint(f)
	}
	return mustJSONText(t, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name}, "data": data})
}

func mustJSONText(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Every shape of secret value (letters, '-', non-ASCII, quotes, multi-line
// key material, a number, a value starting with a YAML indicator), in
// every form a template writes it, is masked in every output recond makes
// in-process: the differences of `recond diff` in text and JSON, the log
// (recond's records, the differences and failures it logs, any record
// through its handler), the status page and its JSON, the API server's
// errors (an admission policy quoting the value), and the render's errors
// (a kustomize error quoting a Secret's value, a parser's error about a
// value it reads as an alias or a tag). Every value is rotated once, so
// that both sides of a difference hold one.
func TestEveryValueShapeIsMaskedInEveryOutput(t *testing.T) {
	h := newHarness(t)
	first, second := redacttest.Shapes(t), redacttest.Shapes(t)
	src := &decrypting{}
	h.wrap = func(s reconcile.Source) reconcile.Source { src.Source = s; return src }
	var logged testenv.SyncBuffer
	var rec *reconcile.Reconciler
	secrets := func() *redact.Set {
		if rec == nil {
			return nil
		}
		return rec.Secrets()
	}
	log := slog.New(redact.NewHandler(slog.NewJSONHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug}), secrets))
	page := status.New(status.Info{Namespace: h.ns, Instance: h.cfg.Name, Repo: h.url}, status.Options{})
	h.observers = []reconcile.Observer{reconcile.LogObserver{Log: log}, page}
	rec = h.reconciler()

	var out strings.Builder
	show := func(what, text string) { fmt.Fprintf(&out, "== %s\n%s\n", what, text) }
	var ids []uint64
	tick := func(what string) *reconcile.Result {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		r := rec.Tick(ctx)
		ids = append(ids, r.ID)
		if f := r.Failure(); f != nil {
			show(what+": failure", f.Err.Error())
		}
		return r
	}
	commit := func(shapes []redacttest.Shape, extra map[string]string) {
		files := map[string]string{}
		for i, sh := range shapes {
			files[fmt.Sprintf("cm-%d.json", i)] = shapeConfigMap(t, fmt.Sprintf("cm-%d", i), sh)
		}
		for k, v := range extra {
			files[k] = v
		}
		h.repo.Commit("shapes", files)
	}

	// 1. Every value copied into a ConfigMap.
	src.decrypted(first)
	commit(first, nil)
	if r := tick("first"); r.Outcome != reconcile.OutcomeApplied {
		t.Fatalf("first tick: %s %v", r.Outcome, r.Failure())
	}
	// 2. Every value rotated: recond diff, then the tick that applies it.
	src.decrypted(second)
	commit(second, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	plan := rec.Plan(ctx)
	cancel()
	if len(plan.Changes) != len(second) {
		t.Fatalf("recond diff: %d changes, want %d: %v", len(plan.Changes), len(second), plan.Failure())
	}
	js, err := json.Marshal(plan.Changes)
	if err != nil {
		t.Fatal(err)
	}
	show("diff JSON", string(js))
	for _, c := range plan.Changes {
		show("diff text", c.String())
	}
	if !strings.Contains(out.String(), "<secret sha256:") || !strings.Contains(out.String(), "data.b64") {
		t.Errorf("recond diff shows no masked difference:\n%s", out.String())
	}
	if r := tick("rotated"); r.Outcome != reconcile.OutcomeApplied {
		t.Fatalf("rotated tick: %s %v", r.Outcome, r.Failure())
	}
	// 3. Any record of the log, in any form of any value.
	for _, sh := range append(slices.Clone(first), second...) {
		for _, f := range sh.Forms(t) {
			log.Info("a record that quotes "+f.Text, "error", errors.New("failed: "+f.Text), "text", f.Text)
		}
	}
	// 4. The API server quotes the value in its refusal (an admission
	// policy, as a webhook may): the error is concealed.
	quotingPolicy(t, h.ns)
	for i, sh := range second {
		commit(second, map[string]string{"guarded.json": shapeConfigMap(t, "guarded", sh)})
		if r := tick(fmt.Sprintf("guarded %d", i)); r.Outcome != reconcile.OutcomeFailed || !strings.Contains(r.Failure().Err.Error(), "ConfigMap/guarded") {
			t.Errorf("%s: the refused ConfigMap: %s %v", sh.Name, r.Outcome, r.Failure())
		}
	}
	// 5. The render's errors: kustomize quoting a Secret's value, and a
	// parser reading one as an alias or a tag.
	for _, sh := range second {
		secret := mustJSONText(t, map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "db"},
			"stringData": map[string]any{"password": sh.Value}})
		h.repo.Orphan("kustomize quotes the value", map[string]string{
			"kustomization.yaml": "resources:\n- secret.json\nreplacements:\n- source: {kind: Secret, name: db, fieldPath: stringData.password}\n" +
				"  targets:\n  - select: {kind: Secret, name: db}\n    fieldPaths: [stringData.password.x]\n",
			"secret.json": secret,
		})
		if r := tick("kustomize " + sh.Name); r.Failure() == nil || r.Failure().Reason != reconcile.ReasonInvalid {
			t.Errorf("%s: kustomize's refusal: %s %v", sh.Name, r.Outcome, r.Failure())
		}
		if !sh.Indicator {
			continue
		}
		h.repo.Orphan("a value the parser reads as YAML", map[string]string{"secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: " + sh.Value + "\n"})
		if r := tick("parser " + sh.Name); r.Failure() == nil && !strings.HasPrefix(sh.Value, "&") {
			t.Errorf("%s: the parser's refusal: %s", sh.Name, r.Outcome)
		}
	}

	show("log", logged.String())
	serve := func(path string) {
		w := httptest.NewRecorder()
		page.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		if w.Code != http.StatusOK {
			t.Errorf("GET %s: %d", path, w.Code)
		}
		show("GET "+path, w.Body.String())
	}
	serve("/api/v1/status")
	serve("/")
	for _, id := range ids {
		serve(fmt.Sprintf("/ticks/%d", id))
	}
	all := out.String()
	for _, want := range []string{"<redacted>", "<secret sha256:", "not shown", "ConfigMap/guarded", "kustomize build", "secret.yaml: document 1, line 6"} {
		if !strings.Contains(all, want) {
			t.Errorf("the outputs never say %q", want)
		}
	}
	for _, sh := range append(slices.Clone(first), second...) {
		shown := []string{sh.Secret()}
		for _, f := range sh.Forms(t) {
			shown = append(shown, f.Text) // a float Helm printed holds no digits of the value in a row
		}
		for _, v := range shown {
			if i := strings.Index(all, v); i >= 0 {
				t.Errorf("%s: an output shows the value as %q: …%s…", sh.Name, v, all[max(0, i-300):min(len(all), i+100)])
			}
		}
	}
}

// quotingPolicy makes the API server refuse a ConfigMap named "guarded"
// with a message that quotes its data.raw, as an admission webhook may.
func quotingPolicy(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	name := "recond-quotes-" + ns
	fail := admissionregistrationv1.Fail
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression:        "object.metadata.name != 'guarded'",
				MessageExpression: "'refused: ' + object.data.raw + ' ' + object.data.b64",
			}},
		},
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
	a := cp.Client.AdmissionregistrationV1()
	if _, err := a.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = a.ValidatingAdmissionPolicyBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = a.ValidatingAdmissionPolicies().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "guarded"}, Data: map[string]string{"raw": "probe-value", "b64": "x"}}
	deadline := time.Now().Add(time.Minute) // a guard against a hang: the policy is enforced within seconds
	for {
		_, err := cp.Client.CoreV1().ConfigMaps(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil && strings.Contains(err.Error(), "refused: probe-value") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the policy is not enforced: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
