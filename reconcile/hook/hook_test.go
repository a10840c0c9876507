package hook

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"recond.dev/recond/reconcile/cluster"
	"recond.dev/recond/reconcile/health"
)

func obj(kind, name string, ann map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": kind}}
	if kind == "Job" {
		u.SetAPIVersion("batch/v1")
	}
	u.SetName(name)
	u.SetAnnotations(ann)
	return u
}

func hookOf(kind, name, events, weight, policy string) *Hook {
	ann := map[string]string{"helm.sh/hook": events, "helm.sh/hook-weight": weight}
	if policy != "" {
		ann["helm.sh/hook-delete-policy"] = policy
	}
	return New(obj(kind, name, ann))
}

func keysOf(hooks []*Hook) string {
	var out []string
	for _, h := range hooks {
		out = append(out, h.Key())
	}
	return strings.Join(out, " ")
}

// TestNew: events lower-cased and trimmed, the weight read (0 when
// unreadable), before-hook-creation when no policy is named.
func TestNew(t *testing.T) {
	h := hookOf("Job", "migrate", " Pre-Install, pre-upgrade ,", " -3 ", "")
	if strings.Join(h.Events, ",") != "pre-install,pre-upgrade" || h.Weight != -3 || !h.Has(BeforeCreation) || h.Has(Succeeded) {
		t.Errorf("got %+v", h)
	}
	h = hookOf("Job", "x", "post-install", "heavy", "hook-succeeded, hook-failed")
	if h.Weight != 0 || h.Has(BeforeCreation) || !h.Has(Succeeded) || !h.Has(Failed) {
		t.Errorf("got %+v", h)
	}
}

// TestOrder: an event's hooks by weight, then kind order, then key; split
// into weights.
func TestOrder(t *testing.T) {
	hooks := []*Hook{
		hookOf("Job", "b", "pre-install", "1", ""),
		hookOf("Job", "a", "pre-install", "1", ""),
		hookOf("ConfigMap", "z", "pre-install", "1", ""),
		hookOf("Job", "first", "pre-install,pre-upgrade", "-1", ""),
		hookOf("Job", "post", "post-install", "0", ""),
	}
	list := Of(hooks, "pre-install")
	if got, want := keysOf(list), "Job/first ConfigMap/z Job/a Job/b"; got != want {
		t.Errorf("order %q, want %q", got, want)
	}
	var groups []string
	for _, g := range Weights(list) {
		groups = append(groups, keysOf(g))
	}
	if got, want := strings.Join(groups, " | "), "Job/first | ConfigMap/z Job/a Job/b"; got != want {
		t.Errorf("weights %q, want %q", got, want)
	}
	s := Begin("rev", "")
	if s.Event != "install" || s.Phase != PhasePre || Begin("rev", "old").Event != "upgrade" {
		t.Errorf("begin: %+v", s)
	}
	s.Started["Job/first"] = s.Started["Job/a"]
	s.Done = []string{"Job/b"}
	if got, want := keysOf(s.Pending(list)), "ConfigMap/z Job/a"; got != want {
		t.Errorf("pending %q, want %q", got, want)
	}
}

// TestState: what the inventory records reads back the same.
func TestState(t *testing.T) {
	s := Begin("rev", "old")
	s.Fail(errors.New("boom"), PhasePre)
	back, err := ParseState(s.Encode())
	if err != nil || back.Encode() != s.Encode() || back.Phase != PhaseFailed || back.FailedIn != PhasePre {
		t.Errorf("%+v, %v: want %+v", back, err, s)
	}
	if none, err := ParseState(""); none != nil || err != nil || none.Encode() != "" || none.Clone() != nil {
		t.Errorf("empty: %v %v", none, err)
	}
	if _, err := ParseState("{"); err == nil {
		t.Error("a broken state reads")
	}
}

// TestCheckBudget: the number of hooks and the bytes of their state.
func TestCheckBudget(t *testing.T) {
	var hooks []*Hook
	for i := range 3 {
		hooks = append(hooks, hookOf("Job", strings.Repeat("j", 50)+string(rune('a'+i)), "pre-install", "0", ""))
	}
	if err := CheckBudget(hooks, 0, 0); err != nil {
		t.Errorf("defaults: %v", err)
	}
	if err := CheckBudget(hooks, 2, 0); err == nil || !strings.Contains(err.Error(), "3 hooks, more than --helm-hook-max (2)") {
		t.Errorf("max 2: %v", err)
	}
	if err := CheckBudget(hooks, 0, 200); err == nil || !strings.Contains(err.Error(), "more than --helm-hook-max-bytes (200)") {
		t.Errorf("200 bytes: %v", err)
	}
}

// TestStatus: a Job by its conditions; gone is failed.
func TestStatus(t *testing.T) {
	job := func(cond, status string) *unstructured.Unstructured {
		u := obj("Job", "j", nil)
		u.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": cond, "status": status, "reason": "BackoffLimitExceeded", "message": "too many"}}}
		return u
	}
	for _, tc := range []struct {
		live *unstructured.Unstructured
		want health.Status
		why  string
	}{
		{nil, health.Failed, "its object is gone"},
		{job("Complete", "True"), health.Current, ""},
		{job("Failed", "True"), health.Failed, "Job failed: BackoffLimitExceeded too many"},
		{job("Failed", "False"), health.InProgress, ""},
	} {
		if got, why := Status(tc.live); got != tc.want || why != tc.why {
			t.Errorf("%v: %s %q, want %s %q", tc.live, got, why, tc.want, tc.why)
		}
	}
}

// TestPlanOf: the object an earlier run left is deleted first
// (before-hook-creation) and both writes are checked; a refusal is named.
func TestPlanOf(t *testing.T) {
	h := hookOf("Job", "migrate", "pre-install", "2", "")
	var asked []string
	check := func(w cluster.Write) error {
		asked = append(asked, string(w.Verb))
		if w.Verb == cluster.VerbDelete {
			return errors.New("not this instance's hook")
		}
		return nil
	}
	p := PlanOf(h, obj("Job", "migrate", nil), nil, check)
	if p.Deletes != "Job/migrate" || p.Refused != "not this instance's hook" || p.Err == nil || len(asked) != 1 {
		t.Errorf("plan %+v after %v", p, asked)
	}
	if want := "hook Job/migrate (pre-install, weight 2): creates Job/migrate, after deleting the Job/migrate an earlier run left; refused: not this instance's hook"; p.String() != want {
		t.Errorf("%q\nwant %q", p.String(), want)
	}
	asked = nil
	if p := PlanOf(h, nil, nil, check); p.Deletes != "" || p.Err != nil || len(asked) != 1 {
		t.Errorf("nothing left: %+v after %v", p, asked)
	}
	if p := PlanOf(h, nil, errors.New("forbidden"), check); p.Refused != "forbidden" {
		t.Errorf("read failed: %+v", p)
	}
}
