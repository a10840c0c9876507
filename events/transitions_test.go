package events

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"recond.dev/recond/reconcile"
	"recond.dev/recond/reconcile/diff"
	"recond.dev/recond/reconcile/health"
)

var (
	inventory = reconcile.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Name: "recond-inventory-recond", UID: "inv"}
	all       = []reconcile.Phase{reconcile.PhaseRead, reconcile.PhaseObserve, reconcile.PhaseDiff, reconcile.PhaseApply, reconcile.PhaseHealth}
)

func ok(phases ...reconcile.Phase) []reconcile.PhaseResult {
	var out []reconcile.PhaseResult
	for _, p := range phases {
		out = append(out, reconcile.PhaseResult{Phase: p})
	}
	return out
}

func failedIn(p reconcile.Phase, before ...reconcile.Phase) []reconcile.PhaseResult {
	return append(ok(before...), reconcile.PhaseResult{Phase: p,
		Err: &reconcile.PhaseError{Phase: p, Reason: reconcile.ReasonUnavailable, Err: errors.New("connection refused")}})
}

func op(a diff.Action, kind, name string, err error, fields ...string) reconcile.Operation {
	return reconcile.Operation{Kind: kind, Name: name, APIVersion: "v1", UID: types.UID("u-" + kindName(kind, name)), Action: a, Err: err, Fields: fields}
}

func kindName(kind, name string) string { return kind + "/" + name }

func healthOf(objs ...reconcile.ObjectHealth) *reconcile.Health {
	h := &reconcile.Health{Counts: map[health.Status]int{}}
	var s []health.Status
	for _, o := range objs {
		h.Objects = append(h.Objects, o)
		h.Counts[o.Status]++
		s = append(s, o.Status)
	}
	h.Status = health.Of(s)
	return h
}

func obj(kind, name string, s health.Status, msg string) reconcile.ObjectHealth {
	return reconcile.ObjectHealth{Ref: reconcile.ObjectRef{APIVersion: "v1", Kind: kind, Name: name}, Status: s, Message: msg}
}

// tick is a result with the common fields filled in.
func tick(rev string, phases []reconcile.PhaseResult, h *reconcile.Health, ops ...reconcile.Operation) *reconcile.Result {
	return &reconcile.Result{Revision: rev, Phases: phases, Health: h, Ops: ops, Inventory: inventory}
}

func applied(r *reconcile.Result) *reconcile.Result { r.RevisionApplied = true; return r }

// summary is "Reason Kind/name" for each intent, and the note when says is
// part of it, for compact expectations.
func summary(is []Intent) []string {
	out := []string{}
	for _, i := range is {
		out = append(out, i.Type+" "+i.Reason+" "+i.Regarding.String())
	}
	return out
}

// step is one tick given to a Transitions, the Events it should give (as
// summary writes them) and, by index, what their notes must contain.
type step struct {
	name  string
	res   *reconcile.Result
	want  []string
	notes map[int]string
}

// walk gives tr each step's tick in order and checks the Events of each.
func walk(t *testing.T, tr *Transitions, steps []step) {
	t.Helper()
	for _, s := range steps {
		got := tr.Next(s.res)
		if d := cmp.Diff(s.want, summary(got)); d != "" {
			t.Errorf("%s: Events (-want +got):\n%s", s.name, d)
			continue
		}
		for i, says := range s.notes {
			if !strings.Contains(got[i].Note, says) {
				t.Errorf("%s: Event %d note %q does not say %q", s.name, i, got[i].Note, says)
			}
		}
	}
}

func TestTransitions(t *testing.T) {
	web := func(s health.Status) reconcile.ObjectHealth { return obj("Deployment", "web", s, "msg "+string(s)) }
	cm := obj("ConfigMap", "settings", health.Current, "")
	var tr Transitions
	walk(t, &tr, []step{
		{"first sync: created, revision applied, still progressing",
			applied(tick("aaaa", ok(all...), healthOf(web(health.InProgress), cm),
				op(diff.Create, "Deployment", "web", nil), op(diff.Create, "ConfigMap", "settings", nil))),
			[]string{"Normal Created Deployment/web", "Normal Created ConfigMap/settings", "Normal RevisionApplied ConfigMap/recond-inventory-recond"},
			map[int]string{0: "created at revision aaaa"}},
		{"rolled out: the revision is healthy",
			tick("aaaa", ok(all...), healthOf(web(health.Current), cm)),
			[]string{"Normal RevisionHealthy ConfigMap/recond-inventory-recond"}, nil},
		{"converged and healthy: nothing", tick("aaaa", ok(all...), healthOf(web(health.Current), cm)), []string{}, nil},
		{"drift corrected names the fields",
			tick("aaaa", ok(all...), healthOf(web(health.Current), cm), op(diff.Update, "Deployment", "web", nil, "spec.replicas")),
			[]string{"Normal Updated Deployment/web"}, map[int]string{0: "drift corrected: spec.replicas"}},
		{"failed: degraded", tick("aaaa", ok(all...), healthOf(web(health.Failed), cm)),
			[]string{"Warning HealthDegraded Deployment/web"}, map[int]string{0: "msg failed"}},
		{"still failed: nothing", tick("aaaa", ok(all...), healthOf(web(health.Failed), cm)), []string{}, nil},
		{"on its way: nothing yet", tick("aaaa", ok(all...), healthOf(web(health.InProgress), cm)), []string{}, nil},
		{"current: recovered (the revision was healthy before: no second RevisionHealthy)",
			tick("aaaa", ok(all...), healthOf(web(health.Current), cm)),
			[]string{"Normal HealthRecovered Deployment/web"}, nil},
		{"read failed: one Event for the streak", tick("", failedIn(reconcile.PhaseRead), nil),
			[]string{"Warning TickFailed ConfigMap/recond-inventory-recond"}, map[int]string{0: "read failed (unavailable): connection refused"}},
		{"read failed again: nothing", tick("", failedIn(reconcile.PhaseRead), nil), []string{}, nil},
		{"recovered", tick("aaaa", ok(all...), healthOf(web(health.Current), cm)),
			[]string{"Normal Recovered ConfigMap/recond-inventory-recond"}, nil},
		{"a new revision whose write fails",
			tick("bbbb", append(failedIn(reconcile.PhaseApply, reconcile.PhaseRead, reconcile.PhaseObserve, reconcile.PhaseDiff), reconcile.PhaseResult{Phase: reconcile.PhaseHealth}),
				healthOf(web(health.Current), cm), op(diff.Update, "Deployment", "web", errors.New("admission denied"))),
			[]string{"Warning ApplyFailed Deployment/web", "Warning TickFailed ConfigMap/recond-inventory-recond"},
			map[int]string{0: "admission denied"}},
		{"the same write fails again: nothing",
			tick("bbbb", append(failedIn(reconcile.PhaseApply, reconcile.PhaseRead, reconcile.PhaseObserve, reconcile.PhaseDiff), reconcile.PhaseResult{Phase: reconcile.PhaseHealth}),
				healthOf(web(health.Current), cm), op(diff.Update, "Deployment", "web", errors.New("admission denied"))),
			[]string{}, nil},
		{"fixed: updated with the revision, recovered; healthy at once",
			applied(tick("cccc", ok(all...), healthOf(web(health.Current), cm), op(diff.Update, "Deployment", "web", nil, "spec.template.spec.containers[name=web].image"))),
			[]string{"Normal Updated Deployment/web", "Normal RevisionApplied ConfigMap/recond-inventory-recond",
				"Normal RevisionHealthy ConfigMap/recond-inventory-recond", "Normal Recovered ConfigMap/recond-inventory-recond"},
			map[int]string{0: "revision cccc applied: spec.template"}},
		{"a dry run rejects a new object",
			func() *reconcile.Result {
				r := tick("dddd", append(failedIn(reconcile.PhaseApply, reconcile.PhaseRead, reconcile.PhaseObserve, reconcile.PhaseDiff), reconcile.PhaseResult{Phase: reconcile.PhaseHealth}),
					healthOf(web(health.Current), cm))
				r.Rejected = []reconcile.Operation{op(diff.Create, "Service", "bad", errors.New("port out of range"))}
				return r
			}(),
			[]string{"Warning ApplyFailed Service/bad", "Warning TickFailed ConfigMap/recond-inventory-recond"}, nil},
		{"pruned", applied(tick("eeee", ok(all...), healthOf(web(health.Current)), op(diff.Delete, "ConfigMap", "settings", nil))),
			[]string{"Normal Pruned ConfigMap/settings", "Normal RevisionApplied ConfigMap/recond-inventory-recond",
				"Normal RevisionHealthy ConfigMap/recond-inventory-recond", "Normal Recovered ConfigMap/recond-inventory-recond"}, nil},
	})
	for i := range 20 {
		if got := tr.Next(tick("eeee", ok(all...), healthOf(web(health.Current)))); len(got) != 0 {
			t.Fatalf("converged tick %d: %v", i+1, summary(got))
		}
	}
}

// TestStartHealthyIsSilent: a process that starts and finds its revision in
// place and healthy sends nothing; one that starts degraded says so.
func TestStartHealthyIsSilent(t *testing.T) {
	var tr Transitions
	if got := tr.Next(tick("aaaa", ok(all...), healthOf(obj("Deployment", "web", health.Current, "")))); len(got) != 0 {
		t.Errorf("first tick, healthy, nothing applied: %v", summary(got))
	}
	var tr2 Transitions
	got := tr2.Next(tick("aaaa", ok(all...), healthOf(obj("Deployment", "web", health.Failed, "Progress deadline exceeded"))))
	if d := cmp.Diff([]string{"Warning HealthDegraded Deployment/web"}, summary(got)); d != "" {
		t.Errorf("first tick, degraded (-want +got):\n%s", d)
	}
}

// TestFloodIsCapped: a first sync of 3,000 objects sends 100 Created Events
// and one on the inventory that sums up the other 2,900.
func TestFloodIsCapped(t *testing.T) {
	tr := Transitions{Max: 100}
	var ops []reconcile.Operation
	for i := range 3000 {
		ops = append(ops, op(diff.Create, "ConfigMap", fmt.Sprintf("c%04d", i), nil))
	}
	got := tr.Next(applied(tick("aaaa", ok(all...), nil, ops...)))
	var created, summaries int
	for _, i := range got {
		switch {
		case i.Reason == ReasonCreated && i.Regarding.Kind == "ConfigMap" && i.Regarding != inventory:
			created++
		case i.Reason == ReasonCreated && i.Regarding == inventory:
			summaries++
			if i.Note != "and 2,900 more objects created" {
				t.Errorf("summary %q, want %q", i.Note, "and 2,900 more objects created")
			}
		}
	}
	if created != 100 || summaries != 1 || len(got) != 102 {
		t.Errorf("%d Created, %d summaries, %d Events in all; want 100, 1, 102 (with RevisionApplied)", created, summaries, len(got))
	}
}

func TestTruncate(t *testing.T) {
	for _, c := range []struct {
		name, in string
		limit    int
		want     string
	}{
		{"short is kept", "short", NoteLimit, "short"},
		{"exactly the limit is kept", strings.Repeat("a", NoteLimit), NoteLimit, strings.Repeat("a", NoteLimit)},
		{"one over is cut", strings.Repeat("a", NoteLimit+1), NoteLimit, strings.Repeat("a", NoteLimit-3) + "…"},
		// 2-byte runes: the cut backs off to a rune boundary.
		{"never inside a rune", strings.Repeat("é", 1000), NoteLimit, strings.Repeat("é", 510) + "…"},
	} {
		got := Truncate(c.in, c.limit)
		if got != c.want {
			t.Errorf("%s: Truncate gave %d bytes %.20q..., want %d bytes %.20q...", c.name, len(got), got, len(c.want), c.want)
		}
		if len(got) > c.limit || !utf8.ValidString(got) {
			t.Errorf("%s: %d bytes, valid UTF-8 %t", c.name, len(got), utf8.ValidString(got))
		}
	}
}

// TestUpdatedNote: an update on the revision applied before is drift
// corrected, one that applies a new revision says which; only field paths,
// never values.
func TestUpdatedNote(t *testing.T) {
	update := op(diff.Update, "Deployment", "web", nil, "spec.replicas", "data.k")
	for _, c := range []struct {
		name  string
		ticks []*reconcile.Result
		want  string
	}{
		{"first tick, every write succeeded, no new revision: drift",
			[]*reconcile.Result{tick("aaaa111", ok(all...), nil, update)}, "drift corrected: spec.replicas, data.k"},
		{"the tick that applies a new revision",
			[]*reconcile.Result{applied(tick("aaaa111", ok(all...), nil, update))}, "revision aaaa111 applied: spec.replicas, data.k"},
		{"after a revision was applied in this process: drift",
			[]*reconcile.Result{applied(tick("aaaa111", ok(all...), nil)), tick("aaaa111", ok(all...), nil, update)},
			"drift corrected: spec.replicas, data.k"},
		{"a new revision applied in part (another write failed)",
			[]*reconcile.Result{applied(tick("aaaa111", ok(all...), nil)),
				tick("bbbb222", failedIn(reconcile.PhaseApply, reconcile.PhaseRead), nil, update, op(diff.Create, "Service", "s", errors.New("x")))},
			"revision bbbb222 applied: spec.replicas, data.k"},
		{"no field paths", []*reconcile.Result{applied(tick("cccc3334444", ok(all...), nil, op(diff.Update, "Deployment", "web", nil)))},
			"revision cccc333 applied"},
	} {
		var tr Transitions
		var got []Intent
		for _, r := range c.ticks {
			got = tr.Next(r)
		}
		if len(got) == 0 || got[0].Reason != ReasonUpdated {
			t.Errorf("%s: Events %v, want Updated first", c.name, summary(got))
			continue
		}
		if got[0].Note != c.want {
			t.Errorf("%s: note %q, want %q", c.name, got[0].Note, c.want)
		}
	}
}

// TestApplyFailedOnceUntilFixed: a write that keeps failing is reported
// once; a tick whose apply phase ran without failing it ends the streak, so
// the next failure is reported again.
func TestApplyFailedOnceUntilFixed(t *testing.T) {
	fail := func() *reconcile.Result {
		return tick("aaaa", failedIn(reconcile.PhaseApply, reconcile.PhaseRead), nil,
			op(diff.Update, "Deployment", "web", errors.New("admission denied")))
	}
	var tr Transitions
	walk(t, &tr, []step{
		{"fails", fail(), []string{"Warning ApplyFailed Deployment/web", "Warning TickFailed ConfigMap/recond-inventory-recond"}, nil},
		{"fails again", fail(), []string{}, nil},
		{"apply phase fails, write not attempted: still the same streak",
			tick("aaaa", failedIn(reconcile.PhaseApply, reconcile.PhaseRead), nil, op(diff.Create, "Service", "s", nil)),
			[]string{"Normal Created Service/s"}, nil},
		{"apply ran and no longer fails it", tick("aaaa", ok(all...), nil), []string{"Normal Recovered ConfigMap/recond-inventory-recond"}, nil},
		{"fails: news again", fail(), []string{"Warning ApplyFailed Deployment/web", "Warning TickFailed ConfigMap/recond-inventory-recond"}, nil},
	})
}

// TestHealthTransitions: degraded once until current again; an object that
// leaves and comes back failed is news.
func TestHealthTransitions(t *testing.T) {
	web := func(s health.Status) *reconcile.Result {
		return tick("aaaa", ok(all...), healthOf(obj("Deployment", "web", s, "deadline")))
	}
	var tr Transitions
	walk(t, &tr, []step{
		{"failed the first time this process sees it", web(health.Failed), []string{"Warning HealthDegraded Deployment/web"}, nil},
		{"in progress", web(health.InProgress), []string{}, nil},
		{"failed again without having recovered", web(health.Failed), []string{}, nil},
		{"unknown", web(health.Unknown), []string{}, nil},
		{"current", web(health.Current), []string{"Normal HealthRecovered Deployment/web", "Normal RevisionHealthy ConfigMap/recond-inventory-recond"}, nil},
		{"current again", web(health.Current), []string{}, nil},
		{"failed", web(health.Failed), []string{"Warning HealthDegraded Deployment/web"}, nil},
		{"gone", tick("aaaa", ok(all...), healthOf()), []string{}, nil},
		{"back, failed", web(health.Failed), []string{"Warning HealthDegraded Deployment/web"}, nil},
	})
}

// TestSecretErrorIsWithheld: an API error about a Secret may quote what it
// refused; its ApplyFailed note says only the reason.
func TestSecretErrorIsWithheld(t *testing.T) {
	err := apierrors.NewInvalid(schema.GroupKind{Kind: "Secret"}, "creds",
		field.ErrorList{field.Invalid(field.NewPath("data", "password"), "s3cret-value", "bad")})
	var tr Transitions
	got := tr.Next(tick("aaaa", failedIn(reconcile.PhaseApply, reconcile.PhaseRead), nil, op(diff.Update, "Secret", "creds", err)))
	if len(got) == 0 || got[0].Reason != ReasonApplyFailed {
		t.Fatalf("Events %v, want ApplyFailed first", summary(got))
	}
	if strings.Contains(got[0].Note, "s3cret-value") || !strings.Contains(got[0].Note, "Invalid") {
		t.Errorf("note %q: want the reason Invalid and no value", got[0].Note)
	}
	got = new(Transitions).Next(tick("aaaa", failedIn(reconcile.PhaseApply, reconcile.PhaseRead), nil, op(diff.Update, "ConfigMap", "c", err)))
	if !strings.Contains(got[0].Note, "s3cret-value") {
		t.Errorf("a ConfigMap's error is given in full, got %q", got[0].Note)
	}

	// The phase's error (what TickFailed reports) quotes the value too:
	// a write refused by the dry run, and a write that failed.
	for _, how := range []string{"rejected", "write"} {
		r := tick("aaaa", []reconcile.PhaseResult{{Phase: reconcile.PhaseRead}, {Phase: reconcile.PhaseApply,
			Err: &reconcile.PhaseError{Phase: reconcile.PhaseApply, Reason: reconcile.ReasonInvalid, Err: fmt.Errorf("apply Secret/creds: %w", err)}}}, nil)
		if how == "rejected" {
			r.Rejected = []reconcile.Operation{op(diff.Update, "Secret", "creds", err)}
		} else {
			r.Ops = []reconcile.Operation{op(diff.Update, "Secret", "creds", err)}
		}
		got := new(Transitions).Next(r)
		if d := cmp.Diff([]string{"Warning ApplyFailed Secret/creds", "Warning TickFailed ConfigMap/recond-inventory-recond"}, summary(got)); d != "" {
			t.Fatalf("%s: Events (-want +got):\n%s", how, d)
		}
		for _, e := range got {
			if strings.Contains(e.Note, "s3cret-value") {
				t.Errorf("%s: %s note %q shows the Secret's value", how, e.Reason, e.Note)
			}
		}
		if !strings.Contains(got[1].Note, "apply failed (invalid): Invalid") {
			t.Errorf("%s: TickFailed note %q, want phase, reason and the API's reason", how, got[1].Note)
		}
	}
}

// TestRevisionHealthyOnlyAtTheAppliedRevision: a new revision that fails to
// apply leaves an older one running; that one being healthy is no news about
// the new one.
func TestRevisionHealthyOnlyAtTheAppliedRevision(t *testing.T) {
	web := func(s health.Status) *reconcile.Health { return healthOf(obj("Deployment", "web", s, "")) }
	var tr Transitions
	walk(t, &tr, []step{
		{"aaaa applied, progressing", applied(tick("aaaa", ok(all...), web(health.InProgress), op(diff.Create, "Deployment", "web", nil))),
			[]string{"Normal Created Deployment/web", "Normal RevisionApplied ConfigMap/recond-inventory-recond"}, nil},
		{"bbbb fails to apply; aaaa's objects healthy",
			tick("bbbb", append(failedIn(reconcile.PhaseApply, reconcile.PhaseRead, reconcile.PhaseObserve, reconcile.PhaseDiff), reconcile.PhaseResult{Phase: reconcile.PhaseHealth}),
				web(health.Current), op(diff.Update, "Deployment", "web", errors.New("admission denied"))),
			[]string{"Warning ApplyFailed Deployment/web", "Warning TickFailed ConfigMap/recond-inventory-recond"}, nil},
		{"bbbb applied, healthy", applied(tick("bbbb", ok(all...), web(health.Current), op(diff.Update, "Deployment", "web", nil, "spec.replicas"))),
			[]string{"Normal Updated Deployment/web", "Normal RevisionApplied ConfigMap/recond-inventory-recond",
				"Normal RevisionHealthy ConfigMap/recond-inventory-recond", "Normal Recovered ConfigMap/recond-inventory-recond"}, nil},
	})
}

// TestObjectsOfTwoGroupsAreTwoObjects: a Widget of one group failing does
// not hide a Widget of the same name in another group failing.
func TestObjectsOfTwoGroupsAreTwoObjects(t *testing.T) {
	a := reconcile.ObjectHealth{Ref: reconcile.ObjectRef{APIVersion: "a.example.com/v1", Kind: "Widget", Name: "w"}, Status: health.Failed}
	b := a
	b.Ref.APIVersion = "b.example.com/v1"
	var tr Transitions
	tr.Next(tick("aaaa", ok(all...), healthOf(a)))
	got := tr.Next(tick("aaaa", ok(all...), healthOf(a, b)))
	if d := cmp.Diff([]string{"Warning HealthDegraded Widget/w"}, summary(got)); d != "" || got[0].Regarding.APIVersion != "b.example.com/v1" {
		t.Errorf("the second group's Widget failing (-want +got):\n%s %+v", d, got)
	}
}

// TestDryRunWritesNoEvent: a dry run wrote nothing, so it records no
// Created, Updated or Pruned, nor RevisionApplied.
func TestDryRunWritesNoEvent(t *testing.T) {
	r := applied(tick("aaaa", ok(all...), nil, op(diff.Create, "ConfigMap", "a", nil),
		op(diff.Update, "ConfigMap", "b", nil, "data.k"), op(diff.Delete, "ConfigMap", "c", nil)))
	r.DryRun = true
	if got := new(Transitions).Next(r); len(got) != 0 {
		t.Errorf("dry run: %v, want none", summary(got))
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 7: "7", 999: "999", 1000: "1,000", 2900: "2,900", 1234567: "1,234,567"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

// A suspension is told when it begins, when it changes and when it ends
// (by whom, or that it ran out); the ticks in between say nothing of it.
func TestSuspensionTransitions(t *testing.T) {
	start := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	sus := &reconcile.Suspension{Until: start.Add(2 * time.Hour), Reason: "incident 42", By: "alice"}
	at := func(r *reconcile.Result, when time.Time, s *reconcile.Suspension, by string) *reconcile.Result {
		r.Start, r.Suspension, r.ResumedBy = when, s, by
		return r
	}
	longer := *sus
	longer.Until = start.Add(4 * time.Hour)
	var tr Transitions
	walk(t, &tr, []step{
		{"suspended", at(tick("aaaa", ok(all...), nil), start, sus, ""), []string{"Warning Suspended ConfigMap/recond-inventory-recond"}, map[int]string{0: "suspended by alice until 2026-12-02T12:00:00Z: incident 42"}},
		{"still suspended: nothing", at(tick("aaaa", ok(all...), nil), start.Add(time.Minute), sus, ""), []string{}, nil},
		{"extended", at(tick("aaaa", ok(all...), nil), start.Add(2*time.Minute), &longer, ""), []string{"Warning Suspended ConfigMap/recond-inventory-recond"}, map[int]string{0: "until 2026-12-02T14:00:00Z"}},
		{"resumed by bob", at(tick("aaaa", ok(all...), nil), start.Add(3*time.Minute), nil, "bob"), []string{"Normal Resumed ConfigMap/recond-inventory-recond"}, map[int]string{0: "resumed by bob (suspended by alice: incident 42)"}},
		{"not suspended: nothing", at(tick("aaaa", ok(all...), nil), start.Add(4*time.Minute), nil, ""), []string{}, nil},
		{"suspended again", at(tick("aaaa", ok(all...), nil), start.Add(5*time.Minute), sus, ""), []string{"Warning Suspended ConfigMap/recond-inventory-recond"}, nil},
		{"ran out", at(tick("aaaa", ok(all...), nil), sus.Until.Add(time.Second), nil, ""), []string{"Normal Resumed ConfigMap/recond-inventory-recond"}, map[int]string{0: "ran out at 2026-12-02T12:00:00Z"}},
		{"suspended once more", at(tick("aaaa", ok(all...), nil), start.Add(6*time.Minute), sus, ""), []string{"Warning Suspended ConfigMap/recond-inventory-recond"}, nil},
		{"annotations removed", at(tick("aaaa", ok(all...), nil), start.Add(7*time.Minute), nil, ""), []string{"Normal Resumed ConfigMap/recond-inventory-recond"}, map[int]string{0: "annotations were removed"}},
	})
}
