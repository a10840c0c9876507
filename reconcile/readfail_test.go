package reconcile_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"recond.dev/recond/reconcile"
	"recond.dev/recond/reconcile/source"
)

// countedSource counts renders, can fail them for a reason of the tick,
// and has keys whose fingerprint the test changes.
type countedSource struct {
	reconcile.Source
	renders atomic.Int32
	keys    atomic.Int32
	fail    atomic.Pointer[error]
}

func (c *countedSource) Render(ctx context.Context, sha string) ([]source.Manifest, error) {
	c.renders.Add(1)
	if err := c.fail.Load(); err != nil {
		return nil, *err
	}
	return c.Source.Render(ctx, sha)
}

func (c *countedSource) KeysFingerprint() [32]byte { return [32]byte{byte(c.keys.Load())} }

// A revision whose render failed for a reason of its own is not rendered
// again at every interval: later ticks fail with the same error without a
// render, until a tick someone asked for (recond trigger or sync, a push
// webhook) or a change of the decryption keys. A failure of the tick (the
// network, the worker) is not kept, and a new revision renders at once.
func TestRenderFailureKeptPerRevision(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit("a manifest that is not YAML", map[string]string{"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c\n"})
	src := &countedSource{}
	h.wrap = func(s reconcile.Source) reconcile.Source { src.Source = s; return src }
	rec := h.reconciler()
	tick := func(why reconcile.Trigger) *reconcile.Result {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return rec.TickFor(ctx, why)
	}
	transient := error(&source.Error{Reason: source.ReasonUnavailable, Err: errors.New("render worker: connection reset")})
	var first string
	for i, step := range []struct {
		why       reconcile.Trigger
		keys      bool
		transient bool
		renders   int32
	}{
		{why: reconcile.TriggerInterval, renders: 1},
		{why: reconcile.TriggerInterval, renders: 1},
		{why: reconcile.TriggerWatch, renders: 1},
		{why: reconcile.TriggerManual, renders: 2},
		{why: reconcile.TriggerInterval, renders: 2},
		{why: reconcile.TriggerWebhook, renders: 3},
		{why: reconcile.TriggerInterval, renders: 3},
		{why: reconcile.TriggerInterval, keys: true, renders: 4},
		{why: reconcile.TriggerInterval, renders: 4},
		{why: reconcile.TriggerManual, transient: true, renders: 5},
		{why: reconcile.TriggerInterval, transient: true, renders: 6},
	} {
		if step.keys {
			src.keys.Add(1)
		}
		if step.transient {
			src.fail.Store(&transient)
		}
		r := tick(step.why)
		f := r.Failure()
		want := reconcile.ReasonInvalid
		if step.transient {
			want = reconcile.ReasonUnavailable
		}
		if f == nil || f.Phase != reconcile.PhaseRead || f.Reason != want {
			t.Fatalf("tick %d (%s): failure %+v, want phase read, reason %s", i, step.why, f, want)
		}
		if first == "" {
			first = f.Err.Error()
		} else if !step.transient && f.Err.Error() != first {
			t.Errorf("tick %d (%s): error %q, want the first render's %q", i, step.why, f.Err, first)
		}
		if got := src.renders.Load(); got != step.renders {
			t.Errorf("tick %d (%s): %d renders, want %d", i, step.why, got, step.renders)
		}
	}
	src.fail.Store(nil)
	h.repo.Commit("fixed", map[string]string{"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"})
	if r := tick(reconcile.TriggerInterval); r.Failure() != nil || src.renders.Load() != 7 {
		t.Errorf("the next revision: failure %v, %d renders; want none and 7", r.Failure(), src.renders.Load())
	}
}

// A manifest named like one of recond's own objects is refused, naming
// the prefix, what recond keeps it for, and whose it is: the seed of a
// chart's random functions as well as the inventory and the Lease.
func TestReservedNameRefusalSaysWhose(t *testing.T) {
	for _, tt := range []struct {
		kind, name string
		says       []string
	}{
		{"Secret", reconcile.SeedPrefix + "shop", []string{`"recond-seed-"`, "seeds", "random functions", `instance "shop"`}},
		{"ConfigMap", reconcile.InventoryPrefix + "shop", []string{`"recond-inventory-"`, "inventories", `instance "shop"`}},
		{"ConfigMap", reconcile.LeasePrefix + "shop", []string{`"recond-leader-"`, "Leases", `instance "shop"`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.repo.Commit("reserved", map[string]string{"o.yaml": "apiVersion: v1\nkind: " + tt.kind + "\nmetadata:\n  name: " + tt.name + "\n"})
			r := h.mustTick(reconcile.OutcomeFailed)
			f := r.Failure()
			if f.Reason != reconcile.ReasonInvalid {
				t.Errorf("reason %s, want invalid", f.Reason)
			}
			for _, s := range append(tt.says, "o.yaml", tt.kind+"/"+tt.name, "rename the object") {
				if !strings.Contains(f.Err.Error(), s) {
					t.Errorf("error %q does not say %s", f.Err, s)
				}
			}
		})
	}
}
