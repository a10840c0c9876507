package events_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	eventsv1 "k8s.io/client-go/kubernetes/typed/events/v1"

	"recond.dev/recond/events"
	"recond.dev/recond/internal/testenv"
	"recond.dev/recond/reconcile"
	"recond.dev/recond/reconcile/diff"
	"recond.dev/recond/reconcile/health"
)

var cp *testenv.ControlPlane

func TestMain(m *testing.M) { os.Exit(testenv.RunTests(m, &cp)) }

// TestEventsReachTheAPIServer sends the Events of a few ticks through the
// real broadcaster and reads them back from events.k8s.io/v1: reasons,
// regarding objects, annotations; then 20 converged ticks add none (neither
// a new Event nor a repeat counted in an Event's series).
func TestEventsReachTheAPIServer(t *testing.T) {
	cp.Require(t)
	ns := cp.Namespace(t)
	ctx := context.Background()
	cm, err := cp.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	inv, err := cp.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "recond-inventory-recond"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	client := eventsv1.NewForConfigOrDie(events.ClientConfig(cp.Config))
	o, err := events.New(client, events.Options{Namespace: ns, Instance: "recond", ReportingInstance: "recond-7d9f-x2"})
	if err != nil {
		t.Fatal(err)
	}
	settings := reconcile.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Name: "settings", UID: cm.UID}
	invRef := reconcile.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Name: inv.Name, UID: inv.UID}
	phases := func() []reconcile.PhaseResult {
		var out []reconcile.PhaseResult
		for _, p := range reconcile.Phases {
			out = append(out, reconcile.PhaseResult{Phase: p})
		}
		return out
	}
	const rev = "0123456789abcdef0123456789abcdef01234567"
	healthy := &reconcile.Health{Status: health.Healthy, Counts: map[health.Status]int{health.Current: 1},
		Objects: []reconcile.ObjectHealth{{Ref: settings, Status: health.Current}}}
	progressing := &reconcile.Health{Status: health.Progressing, Counts: map[health.Status]int{health.InProgress: 1},
		Objects: []reconcile.ObjectHealth{{Ref: settings, Status: health.InProgress}}}
	traceID, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	spanID, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	sampled := trace.ContextWithSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: traceID, SpanID: spanID, TraceFlags: trace.FlagsSampled}))

	o.TickEnd(sampled, &reconcile.Result{Revision: rev, Phases: phases(), Inventory: invRef, RevisionApplied: true, Health: progressing,
		Ops: []reconcile.Operation{{Kind: "ConfigMap", Name: "settings", APIVersion: "v1", UID: cm.UID, Action: diff.Create}}})
	o.TickEnd(ctx, &reconcile.Result{Revision: rev, Phases: phases(), Inventory: invRef, Health: healthy})

	list := func() []string {
		t.Helper()
		l, err := cp.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range l.Items {
			out = append(out, e.Reason)
			if e.Series != nil { // the broadcaster folded a repeat into this Event
				for range e.Series.Count - 1 {
					out = append(out, e.Reason)
				}
			}
			switch e.Reason {
			case events.ReasonCreated:
				if e.Regarding.Name != "settings" || e.Regarding.UID != cm.UID || e.Type != corev1.EventTypeNormal || e.Action != events.ActionApply {
					t.Errorf("Created: regarding %+v, type %s, action %s", e.Regarding, e.Type, e.Action)
				}
				if e.Annotations[events.AnnotationRevision] != rev || e.Annotations[events.AnnotationTraceID] != traceID.String() ||
					e.Annotations[events.AnnotationInstance] != "recond" {
					t.Errorf("Created annotations %v, want the revision, the trace id and the instance", e.Annotations)
				}
				if e.Regarding.Namespace != ns || e.Regarding.Kind != "ConfigMap" || e.Regarding.APIVersion != "v1" || e.Note != "created at revision 0123456" {
					t.Errorf("Created: regarding %+v, note %q", e.Regarding, e.Note)
				}
				if e.ReportingController != events.ReportingController || e.ReportingInstance != "recond-7d9f-x2" {
					t.Errorf("reporting %q / %q", e.ReportingController, e.ReportingInstance)
				}
			case events.ReasonRevisionApplied, events.ReasonRevisionHealthy:
				if e.Regarding.Name != inv.Name || e.Regarding.UID != inv.UID {
					t.Errorf("%s regarding %+v, want the inventory", e.Reason, e.Regarding)
				}
				if _, ok := e.Annotations[events.AnnotationTraceID]; ok && e.Reason == events.ReasonRevisionHealthy {
					t.Errorf("an unsampled tick's Event has a trace id: %v", e.Annotations)
				}
			}
		}
		slices.Sort(out)
		return out
	}
	want := []string{events.ReasonCreated, events.ReasonRevisionApplied, events.ReasonRevisionHealthy}
	got := waitEvents(t, list, len(want))
	if !slices.Equal(got, want) {
		t.Fatalf("Events %v, want %v", got, want)
	}

	for range 20 {
		o.TickEnd(ctx, &reconcile.Result{Revision: rev, Phases: phases(), Inventory: invRef, Health: healthy, Outcome: reconcile.OutcomeConverged})
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := o.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	if got := list(); len(got) != len(want) {
		t.Errorf("after 20 converged ticks: %v, want no new Event", got)
	}
}

func waitEvents(t *testing.T, list func() []string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := list()
		if len(got) >= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestShutdownFlushesOneTick is `recond sync`: one tick, then exit. Shutdown
// returns only once its Events are stored, and a flood is capped: 30
// objects created with MaxObjectEvents 10 are 10 Created Events, one summary
// on the inventory and RevisionApplied.
func TestShutdownFlushesOneTick(t *testing.T) {
	cp.Require(t)
	ns := cp.Namespace(t)
	ctx := context.Background()
	o, err := events.New(eventsv1.NewForConfigOrDie(events.ClientConfig(cp.Config)),
		events.Options{Namespace: ns, Instance: "recond", MaxObjectEvents: 10})
	if err != nil {
		t.Fatal(err)
	}
	r := &reconcile.Result{Revision: "0123456789abcdef0123456789abcdef01234567", RevisionApplied: true}
	for _, p := range reconcile.Phases {
		r.Phases = append(r.Phases, reconcile.PhaseResult{Phase: p})
	}
	for i := range 30 {
		r.Ops = append(r.Ops, reconcile.Operation{Kind: "ConfigMap", Name: fmt.Sprintf("c%02d", i), APIVersion: "v1", Action: diff.Create})
		r.Counts.Created++
	}
	o.TickEnd(ctx, r)
	start := time.Now()
	if err := o.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("Shutdown flushed in %s", time.Since(start).Round(time.Millisecond))
	l, err := cp.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	var notes []string
	for _, e := range l.Items {
		key := e.Reason + " " + e.Regarding.Name
		if e.Regarding.Name != "recond-inventory-recond" {
			key = e.Reason + " object"
		} else {
			notes = append(notes, e.Note)
		}
		count[key]++
	}
	want := map[string]int{"Created object": 10, "Created recond-inventory-recond": 1, "RevisionApplied recond-inventory-recond": 1}
	if d := cmp.Diff(want, count); d != "" {
		t.Errorf("Events right after Shutdown (-want +got):\n%s", d)
	}
	if !slices.Contains(notes, "and 20 more objects created") {
		t.Errorf("inventory notes %q, want the summary of 20 more", notes)
	}
	// After Shutdown, a tick records nothing (and does not panic).
	o.TickEnd(ctx, r)
}
