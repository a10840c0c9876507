package reconcile

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"recond.dev/recond/reconcile/diff"
	"recond.dev/recond/reconcile/hook"
	"recond.dev/recond/reconcile/inventory"
	"recond.dev/recond/reconcile/source"
)

// State is what the phases of one tick hand each other: the next phase
// reads it, and the tick's Result is made of it. Every method on State is
// in this file.
type State struct {
	cfg  Config
	ctx  context.Context // the tick's: done when the loop stops or the tick times out
	stop <-chan struct{} // ctx.Done()

	Revision string
	Fetched  bool
	// Superseded counts the renders this tick stopped because the followed
	// ref moved while they ran.
	Superseded int
	// Hooks are the revision's chart hooks (run around Desired, not held
	// like it); HooksWaiting the ones still running at the end of apply.
	Hooks        []*hook.Hook
	HooksWaiting []string
	// Chart is the chart the revision was, when --path holds one.
	Chart *source.Chart
	// Generated are, by objectKey, the fields of desired objects that a
	// chart's key or certificate maker made (source.Manifest.Generated):
	// written at creation, live values kept after that.
	Generated map[string][][]string
	// Ignored are, by objectKey, the JSON pointers of the fields that
	// recond.dev/ignore-fields took out of desired objects.
	Ignored map[string][]string
	// Skipped are the objects the opt-outs held back; Orphans the owned
	// objects to orphan instead of pruning (recond.dev/prune: disabled),
	// and Orphaned those apply orphaned.
	Skipped []Skip
	// misspelt are the live objects' opt-out annotations with a value
	// recond does not know (ignored, and said).
	misspelt []string
	Orphans  []*unstructured.Unstructured
	Orphaned []ObjectRef
	// Deferred are the prunes the server refused because the object
	// changed since it was observed.
	Deferred []ObjectRef
	Desired  []*unstructured.Unstructured // decorated with recond's labels and annotations
	Live     []*unstructured.Unstructured // owned objects, plus unowned desired ones found by GET
	Changes  []diff.Change                // create, update and delete only
	unserved []schema.GroupVersionKind    // inventory kinds the server does not serve now
	pruned   []schema.GroupVersionKind    // kinds of the objects this tick deleted
	Ops      []Operation
	Counts   Counts
	wrote    bool
	// Terminating are the owned objects being deleted ("Kind/name"): not
	// written or deleted again until they are gone.
	Terminating []string
	// Equivalent are the objects the local diff saw differ but the server
	// has shown applying them changes nothing ("Kind/name").
	Equivalent []string
	// BackingOff are the drifted objects ("Kind/name") left alone this tick
	// because another manager keeps changing them (a fight).
	BackingOff []string
	// Rejected are the writes the validating dry run refused.
	Rejected []Operation
	// RevisionApplied is set when apply recorded a new revision in full.
	RevisionApplied bool
	// Health is what the health phase found.
	Health *Health

	// suspension is what the inventory's annotations say of an operator's
	// suspension (apply_suspend.go); suspensionRead is set once they were read.
	suspension     suspensionState
	suspensionRead bool
	// tick is the tick's number.
	tick uint64

	// recreates are the objects this tick's apply deletes and creates
	// anew (recond.dev/force: recreate).
	recreates *keySet

	// trigger is what asked for the tick.
	trigger Trigger
	// sensitive are the values the revision decrypted (and the previous
	// one's), masked wherever a difference or an error could show them.
	sensitive *diff.Sensitive

	// inv is the inventory this tick works with (inventoryStore.load).
	inv *inventory.Inventory
	// byKey indexes Live (liveByKey).
	byKey map[string]*unstructured.Unstructured
	// written holds what the server returned for each object this tick
	// wrote, by objectKey.
	written map[string]*unstructured.Unstructured

	// quiet is the memo of the last full tick when this one is quiet
	// (quiet.go); gen and genOK the watch cache's generation when observe
	// began; healthUntil when the health assessment may change without
	// any object changing (zero: never).
	quiet *quietMemo
	// delta is what an incremental tick works on (observe_delta.go);
	// listed the kinds observe listed (or, incremental, the memo's).
	delta       *deltaTick
	owned       *ownership // what the apply phase left of the objects owned
	listed      map[schema.GroupKind]schema.GroupVersionKind
	gen         uint64
	genOK       bool
	healthUntil time.Time
}

// stopped returns an error when the tick's context is done: the loop was
// asked to stop, or the tick timed out. Apply calls it between objects.
func (st *State) stopped() error {
	select {
	case <-st.stop:
		return fmt.Errorf("%w: %w", errStopped, context.Cause(st.ctx))
	default:
		return nil
	}
}

func (st *State) desiresKind(k schema.GroupVersionKind) bool {
	for _, d := range st.Desired {
		if d.GroupVersionKind().GroupKind() == k.GroupKind() {
			return true
		}
	}
	return false
}

// objectKey identifies an object within the namespace across API versions.
//
// It is schema.GroupKind's String ("Deployment.apps", "ConfigMap"), a slash
// and the name, built without parsing the whole GroupVersionKind: it is
// called for every object several times per tick.
func objectKey(u *unstructured.Unstructured) string {
	group, _, found := strings.Cut(u.GetAPIVersion(), "/")
	if !found {
		group = "" // core: "v1"
	}
	if group == "" {
		return u.GetKind() + "/" + u.GetName()
	}
	return u.GetKind() + "." + group + "/" + u.GetName()
}

// liveByKey indexes st.Live by objectKey, once per tick (diff and health
// both look objects up in it; observe is done with st.Live by then).
func (st *State) liveByKey() map[string]*unstructured.Unstructured {
	if st.byKey == nil {
		st.byKey = make(map[string]*unstructured.Unstructured, len(st.Live))
		for _, l := range st.Live {
			st.byKey[objectKey(l)] = l
		}
	}
	return st.byKey
}

// applied records what the server made of a desired object this tick
// wrote: the health phase reads it instead of the older live copy. The
// field sets of its managedFields entries, which the health phase does not
// read (it reads their times), are kept as text: a first sync holds one such
// object per object written until the tick ends.
func (st *State) applied(desired, out *unstructured.Unstructured) {
	if out == nil {
		return
	}
	md, _ := out.Object["metadata"].(map[string]any)
	entries, _ := md["managedFields"].([]any)
	for _, e := range entries {
		if m, ok := e.(map[string]any); ok {
			diff.CompactFieldsV1(m)
		}
	}
	if st.written == nil {
		st.written = map[string]*unstructured.Unstructured{}
	}
	st.written[objectKey(desired)] = out
}

// dropChange removes c from the tick's changes: it turned out to change
// nothing.
func (st *State) dropChange(c diff.Change) {
	st.Changes = slices.DeleteFunc(st.Changes, func(o diff.Change) bool {
		return o.Kind == c.Kind && o.Name == c.Name && o.Desired == c.Desired
	})
	st.Counts.Drifted = len(st.Changes)
}

// keySet is a set of objectKeys, safe for concurrent use (the writes of a
// wave run in parallel).
type keySet struct {
	mu   sync.Mutex
	keys map[string]bool
}

// recreate marks a desired object to be recreated by this tick's apply.
func (st *State) recreate(d *unstructured.Unstructured) {
	s := st.recreates
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.keys == nil {
		s.keys = map[string]bool{}
	}
	s.keys[objectKey(d)] = true
}

// recreating reports whether this tick's apply recreates d's object.
func (st *State) recreating(d *unstructured.Unstructured) bool {
	s := st.recreates
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keys[objectKey(d)]
}

func (st *State) skip(u *unstructured.Unstructured, why SkipReason, fields []string) {
	st.Skipped = append(st.Skipped, Skip{Kind: u.GetKind(), Name: u.GetName(), Reason: why, Fields: fields})
}
