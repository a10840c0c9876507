package reconcile

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"recond.dev/recond/reconcile/inventory"
)

// walkInventory is nextInventory the way a walk of every live object
// finds it: the reference the counted one must equal.
func walkInventory(st *State, own *ownership) *inventory.Inventory {
	inv := &inventory.Inventory{Revision: st.Revision}
	for _, d := range st.Desired {
		inv.Add(d.GroupVersionKind())
	}
	for _, l := range st.Live {
		if own.owns(objectKey(l)) {
			inv.Add(l.GroupVersionKind())
		}
	}
	for _, k := range st.unserved {
		inv.Add(k)
	}
	for _, k := range st.pruned {
		inv.Add(k)
	}
	return inv
}

func object(apiVersion, kind, name string, owner string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"name": name}}}
	if owner != "" {
		u.SetLabels(map[string]string{LabelManagedBy: ManagedByValue, LabelInstance: owner})
	}
	return u
}

// The inventory apply records, from the owned objects counted by kind,
// is the one a walk of every live object gives, however the ownership
// changed as the apply went (writes, prunes, orphans), and an ownership
// corrected object by object is the one found walking the objects.
func TestNextInventoryCountsWhatAWalkFinds(t *testing.T) {
	hpa1 := object("autoscaling/v1", "HorizontalPodAutoscaler", "h1", "recond")
	hpa2 := object("autoscaling/v2", "HorizontalPodAutoscaler", "h2", "recond")
	for _, tc := range []struct {
		name    string
		desired []*unstructured.Unstructured
		live    []*unstructured.Unstructured
		// then changes the ownership as an apply would: owned objects
		// written, pruned or orphaned.
		then     func(o *ownership, live []*unstructured.Unstructured)
		unserved []schema.GroupVersionKind
		pruned   []schema.GroupVersionKind
		want     []string
	}{
		{name: "desired kinds only", desired: []*unstructured.Unstructured{object("v1", "ConfigMap", "a", ""), object("apps/v1", "Deployment", "d", "")},
			want: []string{"/v1, Kind=ConfigMap", "apps/v1, Kind=Deployment"}},
		{name: "owned kind Git no longer names", desired: []*unstructured.Unstructured{object("v1", "ConfigMap", "a", "")},
			live: []*unstructured.Unstructured{object("v1", "ConfigMap", "a", "recond"), object("v1", "Secret", "s", "recond"), object("v1", "Service", "x", "other")},
			want: []string{"/v1, Kind=ConfigMap", "/v1, Kind=Secret"}},
		{name: "the last object of a kind pruned, its kind kept for a tick", desired: []*unstructured.Unstructured{object("v1", "ConfigMap", "a", "")},
			live:   []*unstructured.Unstructured{object("v1", "Secret", "s", "recond")},
			then:   func(o *ownership, live []*unstructured.Unstructured) { o.disown(objectKey(live[0])) },
			pruned: []schema.GroupVersionKind{{Version: "v1", Kind: "Secret"}},
			want:   []string{"/v1, Kind=ConfigMap", "/v1, Kind=Secret"}},
		{name: "the last object of a kind orphaned", desired: []*unstructured.Unstructured{object("v1", "ConfigMap", "a", "")},
			live: []*unstructured.Unstructured{object("v1", "Secret", "s", "recond"), object("v1", "Secret", "t", "recond")},
			then: func(o *ownership, live []*unstructured.Unstructured) {
				o.disown(objectKey(live[0]))
				o.disown(objectKey(live[1]))
				o.disown(objectKey(live[1]))
			},
			want: []string{"/v1, Kind=ConfigMap"}},
		{name: "an unowned object written, then owned", desired: []*unstructured.Unstructured{object("v1", "ConfigMap", "a", "")},
			live: []*unstructured.Unstructured{object("v1", "ConfigMap", "a", "")},
			then: func(o *ownership, live []*unstructured.Unstructured) {
				o.own(objectKey(live[0]), live[0])
				o.own("ConfigMap/new", nil)
			},
			want: []string{"/v1, Kind=ConfigMap"}},
		{name: "a kind Git names in two versions: the render's first", desired: []*unstructured.Unstructured{object("autoscaling/v2", "HorizontalPodAutoscaler", "h2", ""), object("autoscaling/v1", "HorizontalPodAutoscaler", "h1", "")},
			live: []*unstructured.Unstructured{hpa1, hpa2},
			want: []string{"autoscaling/v2, Kind=HorizontalPodAutoscaler"}},
		{name: "a kind only live, in two versions: the first live object's", desired: []*unstructured.Unstructured{object("v1", "ConfigMap", "a", "")},
			live: []*unstructured.Unstructured{hpa2, hpa1},
			want: []string{"/v1, Kind=ConfigMap", "autoscaling/v2, Kind=HorizontalPodAutoscaler"}},
		{name: "unserved kinds kept", desired: []*unstructured.Unstructured{object("v1", "ConfigMap", "a", "")},
			unserved: []schema.GroupVersionKind{{Group: "example.com", Version: "v1", Kind: "Widget"}},
			want:     []string{"/v1, Kind=ConfigMap", "example.com/v1, Kind=Widget"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Reconciler{cfg: Config{Name: "recond"}}
			st := newTestState(context.Background())
			st.Revision, st.Desired, st.Live, st.unserved, st.pruned = "rev", tc.desired, tc.live, tc.unserved, tc.pruned
			own := ownershipOf(st.Live, r.cfg.Name)
			if tc.then != nil {
				tc.then(own, st.Live)
			}
			got := (&tick{r: r, st: st}).nextInventory(own)
			if want := walkInventory(st, own); !got.Equal(want) {
				t.Errorf("counted %v, a walk finds %v", got.Kinds, want.Kinds)
			}
			var kinds []string
			for _, k := range got.Kinds {
				kinds = append(kinds, k.String())
			}
			if d := cmp.Diff(tc.want, kinds); d != "" {
				t.Errorf("kinds (-want +got):\n%s", d)
			}
		})
	}
}

// An ownership corrected object by object (an incremental tick's, for the
// objects it read again) is the one a walk of the objects finds.
func TestOwnershipCorrectedIsWalked(t *testing.T) {
	before := []*unstructured.Unstructured{object("v1", "ConfigMap", "a", "recond"), object("v1", "Secret", "s", "recond"),
		object("v1", "ConfigMap", "b", "")}
	after := []*unstructured.Unstructured{object("v1", "ConfigMap", "a", ""), object("v1", "ConfigMap", "b", "recond"),
		object("v1", "ConfigMap", "c", "recond")}
	own := ownershipOf(before, "recond")
	// What an apply did: created c, before any live object of it was known.
	own.own("ConfigMap/c", nil)
	// What the next tick read again: every object, s gone.
	for _, key := range []string{"ConfigMap/a", "Secret/s", "ConfigMap/b", "ConfigMap/c"} {
		own.disown(key)
		for _, u := range after {
			if objectKey(u) == key && ownedBy(u.GetLabels(), "recond") {
				own.own(key, u)
			}
		}
	}
	want := ownershipOf(after, "recond")
	if d := cmp.Diff(want, own, cmp.AllowUnexported(ownership{}, liveKind{})); d != "" {
		t.Errorf("corrected ownership differs from a walk's (-walk +corrected):\n%s", d)
	}
}
