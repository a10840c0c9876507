package reconcile_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"recond.dev/recond/reconcile"
	"recond.dev/recond/reconcile/source"
)

// annotate merges ann (nil removes) into the inventory ConfigMap's
// annotations, as `kubectl annotate` does (its own field manager).
func (h *harness) annotate(t *testing.T, ann map[string]any) {
	t.Helper()
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	if _, err := h.dyn.Resource(gvrConfigMap).Namespace(h.ns).Patch(context.Background(), reconcile.InventoryPrefix+h.cfg.Name,
		types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kubectl-annotate"}); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) inventoryAnnotations(t *testing.T) map[string]string {
	t.Helper()
	return h.get(gvrConfigMap, reconcile.InventoryPrefix+h.cfg.Name).GetAnnotations()
}

// since returns the ticks after the first n.
func since(rs []*reconcile.Result, n int) []*reconcile.Result {
	if n > len(rs) {
		return nil
	}
	return rs[n:]
}

// While suspended, drift by another manager stays (the ticks it asks for
// end out_of_sync, writing nothing), and so does a new revision; resume
// asks for a tick that heals both, and its Result names who resumed.
// Without the apply phase's hold (holdForSuspension) the watch tick heals
// the drift at once.
func TestSuspendHoldsAndResumeHeals(t *testing.T) {
	w := newWatched(t, app())
	ctx := context.Background()
	s, err := w.rec.Suspend(ctx, "alice", "incident 42: manual fix of web", 0)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Until(s.Until); d < 23*time.Hour || d > 24*time.Hour {
		t.Errorf("a suspension without a duration ends in %s, want --suspend-max (24h)", d)
	}
	if a := w.inventoryAnnotations(t); a[reconcile.AnnotationSuspendReason] != "incident 42: manual fix of web" ||
		a[reconcile.AnnotationSuspendedBy] != "alice" || a[reconcile.AnnotationSuspendedUntil] != s.Until.Format(time.RFC3339) {
		t.Errorf("inventory annotations %v", a)
	}
	n := len(w.ticks())
	w.scale(t, 5)
	w.repo.Commit("more replicas in Git", map[string]string{"configmap.yaml": strings.Replace(configMapYAML, "hello", "bonjour", 1)})
	w.rec.Trigger(reconcile.TriggerManual)
	// Two ticks after the drift, at least one of them the watch's: both
	// find the differences and write nothing.
	rs := w.waitFor(t, "two ticks while suspended", func(rs []*reconcile.Result) bool {
		watchTick := false
		for _, r := range since(rs, n) {
			watchTick = watchTick || r.Trigger == reconcile.TriggerWatch
		}
		return len(since(rs, n)) >= 2 && watchTick
	})
	for _, r := range since(rs, n) {
		if r.Suspension == nil || r.Suspension.By != "alice" || len(r.Ops) > 0 || r.Outcome == reconcile.OutcomeApplied {
			t.Fatalf("tick %d while suspended: suspension %v, %d writes, outcome %s", r.ID, r.Suspension, len(r.Ops), r.Outcome)
		}
	}
	if last := rs[len(rs)-1]; last.Outcome != reconcile.OutcomeOutOfSync {
		t.Errorf("a suspended tick with differences ended %s, want out_of_sync", last.Outcome)
	}
	if got := w.replicas(); got != 5 {
		t.Fatalf("replicas %d while suspended, want the manual 5", got)
	}
	if got := w.get(gvrConfigMap, "web-config").Object["data"].(map[string]any)["greeting"]; got != "hello" {
		t.Fatalf("the new revision was applied while suspended: greeting %v", got)
	}

	n = len(w.ticks())
	if err := w.rec.Resume(ctx, "bob"); err != nil {
		t.Fatal(err)
	}
	w.rec.Trigger(reconcile.TriggerManual)
	rs = w.waitFor(t, "a tick that heals after resume", func(rs []*reconcile.Result) bool {
		for _, r := range since(rs, n) {
			if r.Outcome == reconcile.OutcomeApplied {
				return true
			}
		}
		return false
	})
	resumedBy := ""
	for _, r := range since(rs, n) {
		if r.Suspension != nil {
			t.Errorf("tick %d after resume still suspended", r.ID)
		}
		resumedBy += r.ResumedBy
	}
	if resumedBy != "bob" {
		t.Errorf("ResumedBy across the ticks after resume = %q, want bob once", resumedBy)
	}
	if got := w.replicas(); got != 2 {
		t.Errorf("replicas %d after resume, want Git's 2", got)
	}
	if _, ok := w.inventoryAnnotations(t)[reconcile.AnnotationSuspendedUntil]; ok {
		t.Errorf("the suspension's annotations stay after resume")
	}
}

// A suspension ends by itself: the loop wakes at its end (the interval is
// an hour), removes the annotations and heals. Without the wake-up
// (suspensionMemo.wakeAt) no tick comes within the test.
func TestSuspensionExpires(t *testing.T) {
	w := newWatched(t, app())
	if _, err := w.rec.Suspend(context.Background(), "alice", "short", 3*time.Second); err != nil {
		t.Fatal(err)
	}
	w.rec.Trigger(reconcile.TriggerManual)
	n := len(w.ticks())
	w.scale(t, 5)
	rs := w.waitFor(t, "the heal after the suspension ran out", func(rs []*reconcile.Result) bool {
		for _, r := range since(rs, n) {
			if r.Outcome == reconcile.OutcomeApplied {
				return true
			}
		}
		return false
	})
	var healer *reconcile.Result
	sawSuspended := false
	for _, r := range since(rs, n) {
		sawSuspended = sawSuspended || r.Suspension != nil
		if r.Outcome == reconcile.OutcomeApplied {
			healer = r
		}
	}
	if !sawSuspended {
		t.Errorf("no tick saw the suspension before it ran out")
	}
	if healer.Trigger != reconcile.TriggerInterval || healer.Suspension != nil || healer.ResumedBy != "" {
		t.Errorf("healing tick: trigger %s, suspension %v, resumed by %q; want the wake-up at the end (interval), none, \"\"",
			healer.Trigger, healer.Suspension, healer.ResumedBy)
	}
	if a := w.inventoryAnnotations(t); len(a) > 0 && a[reconcile.AnnotationSuspendedUntil] != "" {
		t.Errorf("annotations of the ended suspension stay: %v", a)
	}
	if got := w.replicas(); got != 2 {
		t.Errorf("replicas %d after the suspension ran out, want 2", got)
	}
}

// `kubectl annotate` suspends a running loop: a reason and an author
// without an end last --suspend-max, written back as the end so that every
// process agrees; removing the annotations resumes.
func TestKubectlAnnotateSuspendsARunningLoop(t *testing.T) {
	w := newWatched(t, app())
	n := len(w.ticks())
	w.annotate(t, map[string]any{reconcile.AnnotationSuspendReason: "by hand", reconcile.AnnotationSuspendedBy: "carol"})
	rs := w.waitFor(t, "a tick that sees the suspension", func(rs []*reconcile.Result) bool {
		for _, r := range since(rs, n) {
			if r.Suspension != nil {
				return true
			}
		}
		return false
	})
	s := rs[len(rs)-1].Suspension
	if s == nil || s.By != "carol" || s.Reason != "by hand" || time.Until(s.Until) < 23*time.Hour {
		t.Fatalf("suspension %v; want carol's, by hand, about 24h", s)
	}
	until := w.inventoryAnnotations(t)[reconcile.AnnotationSuspendedUntil]
	if until != s.Until.UTC().Format(time.RFC3339) {
		t.Errorf("%s = %q, want the end written back: %s", reconcile.AnnotationSuspendedUntil, until, s.Until.UTC().Format(time.RFC3339))
	}
	n = len(w.ticks())
	w.scale(t, 5)
	w.waitFor(t, "the watch tick of the drift", func(rs []*reconcile.Result) bool { return len(since(rs, n)) > 0 })
	if got := w.replicas(); got != 5 {
		t.Fatalf("replicas %d: healed while suspended by annotation", got)
	}
	n = len(w.ticks())
	w.annotate(t, map[string]any{reconcile.AnnotationSuspendReason: nil, reconcile.AnnotationSuspendedBy: nil, reconcile.AnnotationSuspendedUntil: nil})
	w.waitFor(t, "the heal after the annotations went", func(rs []*reconcile.Result) bool {
		for _, r := range since(rs, n) {
			if r.Outcome == reconcile.OutcomeApplied {
				return true
			}
		}
		return false
	})
	if got := w.replicas(); got != 2 {
		t.Errorf("replicas %d after resume by kubectl, want 2", got)
	}
}

// A process that starts (a restart, a standby that takes over) finds the
// suspension on the inventory and writes nothing.
func TestNewProcessStaysSuspended(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit("app", app())
	h.mustTick(reconcile.OutcomeApplied)
	if _, err := h.rec.Suspend(context.Background(), "alice", "incident", time.Hour); err != nil {
		t.Fatal(err)
	}
	h.repo.Commit("change", map[string]string{"configmap.yaml": strings.Replace(configMapYAML, "hello", "bonjour", 1)})
	h.rec = nil // a new process of the instance
	r := h.mustTick(reconcile.OutcomeOutOfSync)
	if r.Suspension == nil || r.Suspension.By != "alice" || len(r.Ops) > 0 {
		t.Fatalf("the new process: suspension %v, %d writes", r.Suspension, len(r.Ops))
	}
	if got := h.get(gvrConfigMap, "web-config").Object["data"].(map[string]any)["greeting"]; got != "hello" {
		t.Errorf("greeting %v: the new process wrote while suspended", got)
	}
}

// A suspension needs a reason and may not outlast --suspend-max.
func TestSuspendRefusesWhatItCannotTake(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit("app", app())
	h.mustTick(reconcile.OutcomeApplied)
	for _, tc := range []struct {
		name, reason string
		d            time.Duration
	}{
		{"no reason", " ", time.Hour},
		{"longer than the maximum", "x", 25 * time.Hour},
		{"negative", "x", -time.Second},
		{"a reason too long", strings.Repeat("x", 2000), time.Hour},
	} {
		if _, err := h.rec.Suspend(context.Background(), "alice", tc.reason, tc.d); !errors.Is(err, reconcile.ErrSuspend) {
			t.Errorf("%s: %v, want ErrSuspend", tc.name, err)
		}
	}
	if _, ok := h.inventoryAnnotations(t)[reconcile.AnnotationSuspendedUntil]; ok {
		t.Errorf("a refused suspension was written")
	}
}

// duringRender is a source that runs a function while it renders.
type duringRender struct {
	reconcile.Source
	once func()
}

func (d *duringRender) Render(ctx context.Context, sha string) ([]source.Manifest, error) {
	if f := d.once; f != nil {
		d.once = nil
		f()
	}
	return d.Source.Render(ctx, sha)
}

// A suspension made while a tick renders (after it read the inventory)
// stops that tick's writes: apply reads it again from the API server.
// Without that second reading the tick writes the new revision.
func TestSuspensionMadeDuringATick(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit("app", app())
	var d *duringRender
	h.wrap = func(s reconcile.Source) reconcile.Source { d = &duringRender{Source: s}; return d }
	h.mustTick(reconcile.OutcomeApplied)
	h.mustTick(reconcile.OutcomeConverged) // the inventory is known: read before the phases
	h.repo.Commit("change", map[string]string{"configmap.yaml": strings.Replace(configMapYAML, "hello", "bonjour", 1)})
	d.once = func() {
		h.annotate(t, map[string]any{reconcile.AnnotationSuspendReason: "mid-tick", reconcile.AnnotationSuspendedBy: "dave",
			reconcile.AnnotationSuspendedUntil: time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
	}
	r := h.mustTick(reconcile.OutcomeOutOfSync)
	if r.Suspension == nil || r.Suspension.By != "dave" {
		t.Errorf("suspension %v, want dave's", r.Suspension)
	}
	if got := h.get(gvrConfigMap, "web-config").Object["data"].(map[string]any)["greeting"]; got != "hello" {
		t.Errorf("greeting %v: the tick wrote under a suspension made during it", got)
	}
}

// Removing an ended suspension's annotations is conditional on what the
// tick read: a suspension made since (the inventory changed) stays.
// Without the resourceVersion precondition it is removed.
func TestSettlingNeverUndoesANewerSuspension(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit("app", app())
	h.mustTick(reconcile.OutcomeApplied)
	read := h.get(gvrConfigMap, reconcile.InventoryPrefix+h.cfg.Name).GetResourceVersion()
	h.annotate(t, map[string]any{reconcile.AnnotationSuspendReason: "new incident", reconcile.AnnotationSuspendedBy: "erin",
		reconcile.AnnotationSuspendedUntil: time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
	if err := reconcile.SettleEnded(context.Background(), h.rec, read); err != nil {
		t.Fatal(err)
	}
	if a := h.inventoryAnnotations(t); a[reconcile.AnnotationSuspendedBy] != "erin" {
		t.Fatalf("annotations %v: the newer suspension was removed", a)
	}
}
