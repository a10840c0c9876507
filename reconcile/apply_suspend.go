package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"recond.dev/recond/reconcile/cluster"
	"recond.dev/recond/reconcile/inventory"
	"recond.dev/recond/reconcile/suspend"
)

// The engine's side of an operator's suspension (its rules are in
// reconcile/suspend): reading it at every tick from the inventory the tick
// reads anyway, settling its annotations in the apply phase, and the
// Suspend and Resume requests, which the write gate makes take effect at
// once.

// Suspension is an operator's stop of the loop's writes (suspend.Suspension).
type Suspension = suspend.Suspension

// suspensionState is what a tick knows of the suspension, from the
// inventory's annotations.
type suspensionState = suspend.State

// DefaultSuspendMax is how long a suspension lasts at most (--suspend-max).
const DefaultSuspendMax = suspend.DefaultMax

// ErrSuspend is a request to suspend that cannot be taken as given (no
// reason, a duration over --suspend-max).
var ErrSuspend = suspend.ErrSuspend

// MinSuspend is the shortest suspension recond takes.
const MinSuspend = suspend.MinSuspend

// CheckSuspendFor says why d, asked for as a suspension's length, is
// refused (suspend.CheckFor).
func CheckSuspendFor(d time.Duration) error { return suspend.CheckFor(d) }

// suspendMax is --suspend-max.
func (c Config) suspendMax() time.Duration {
	if c.SuspendMax > 0 {
		return c.SuspendMax
	}
	return DefaultSuspendMax
}

// suspensionStore reads and writes the suspension on the inventory for
// the ticks.
type suspensionStore struct{ r *Reconciler }

// note reads the suspension from the inventory ConfigMap the tick read
// (cm; nil: there is none), for st: the inventory is read at every tick
// anyway (inventoryStore.load), so this costs no request.
func (s suspensionStore) note(st *State, cm *unstructured.Unstructured) {
	r := s.r
	st.suspension = r.mem.readSuspension(cm, time.Now(), r.cfg.suspendMax())
	st.suspensionRead = true
	r.mem.setLastKnown(st.suspension.Active)
}

// fresh reads the suspension from the API server.
func (s suspensionStore) fresh(ctx context.Context, st *State) error {
	cm, err := inventoryStore{s.r}.get(ctx)
	if err != nil {
		return err
	}
	s.note(st, cm)
	// Read from the API server by a tick that started after a suspension
	// asked of this process: the reading now decides.
	s.r.gate.settled(st.tick)
	return nil
}

// settle writes what the tick found stale in the suspension's
// annotations: an ended suspension's are removed, a missing or unreadable
// end is written. It is part of the apply phase: a dry run writes nothing.
func (s suspensionStore) settle(ctx context.Context, st *State) error {
	r := s.r
	if !st.suspension.Stale || r.cfg.DryRun {
		return nil
	}
	if err := r.mayWrite(); err != nil {
		return err
	}
	ann := st.suspension.Patch()
	// Only over what was read: a suspension made since is not undone.
	err := s.patch(ctx, ann, st.suspension.RV)
	if apierrors.IsConflict(err) {
		r.log.InfoContext(ctx, "the suspension changed while the tick read it; reading it again")
		if err := s.fresh(ctx, st); err != nil {
			return err
		}
		st.suspension.Stale = false // the next tick settles what is still stale
		return nil
	}
	if err != nil {
		return err
	}
	if st.suspension.Active != nil {
		r.log.WarnContext(ctx, "suspension annotations corrected", "note", st.suspension.Note, "until", ann[AnnotationSuspendedUntil])
	} else {
		r.log.InfoContext(ctx, "suspension ended: its annotations removed", "note", st.suspension.Note)
	}
	st.suspension.Stale = false
	return nil
}

// patch merges ann (a nil value removes one) into the inventory
// ConfigMap's annotations; with rv, only while the ConfigMap is at that
// resourceVersion (a conflict otherwise).
func (s suspensionStore) patch(ctx context.Context, ann map[string]any, rv string) error {
	meta := map[string]any{"annotations": ann}
	if rv != "" {
		meta["resourceVersion"] = rv
	}
	patch, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return err
	}
	w := cluster.Write{Purpose: cluster.PurposeSuspension, GVK: inventory.GVK, Name: inventory.Name(s.r.cfg.Name)}
	if _, err := s.r.kube.MergePatch(ctx, w, patch, suspend.FieldManager); err != nil {
		return fmt.Errorf("write the suspension on the inventory: %w", err)
	}
	return nil
}

// Suspend suspends the instance for d (0: --suspend-max), by by, for
// reason, writing the annotations on its inventory ConfigMap (created when
// missing). The next tick writes nothing; call Request for it to come at
// once.
func (r *Reconciler) Suspend(ctx context.Context, by, reason string, d time.Duration) (*Suspended, error) {
	reason, by = strings.TrimSpace(reason), strings.TrimSpace(by)
	if r.cfg.DryRun {
		return nil, fmt.Errorf("%w: this process runs with --dry-run and writes nothing, its inventory included", ErrSuspend)
	}
	d, err := suspend.Check(by, reason, d, r.cfg.suspendMax())
	if err != nil {
		return nil, err
	}
	if by == "" {
		by = "(unknown)"
	}
	s := &Suspension{Until: time.Now().Add(d).UTC().Truncate(time.Second), Reason: reason, By: by}
	cm := inventory.Object(r.cfg.Name, r.cfg.Namespace)
	cm.SetAnnotations(s.Annotations())
	// From now on this process writes no object, before the annotations
	// are even written: a tick writing now stops at its next write.
	finished := r.gate.holdWrites(s, r.Progress().Started)
	if _, err := r.kube.ApplyAs(ctx, cluster.Write{Purpose: cluster.PurposeSuspension, Object: cm}, suspend.FieldManager); err != nil {
		r.gate.release()
		return nil, fmt.Errorf("write the suspension on the inventory: %w", err)
	}
	// Answered once the writes in flight returned: after the answer,
	// nothing more is written.
	dctx, cancel := context.WithTimeout(ctx, suspendDrainMax)
	defer cancel()
	after, err := r.gate.drain(dctx, finished)
	if err != nil {
		return nil, fmt.Errorf("suspended, but writes still in flight after %s: %w", suspendDrainMax, err)
	}
	r.log.InfoContext(ctx, "suspended", "by", by, "reason", reason, "until", s.Until.Format(time.RFC3339), "writes_after_request", after)
	return &Suspended{Suspension: s, WritesAfterRequest: after}, nil
}

// suspendDrainMax bounds how long Suspend waits for the writes in flight
// (each is one request, bounded by the client's own timeout).
const suspendDrainMax = time.Minute

// Suspended is what Suspend did: the suspension in force, and how many
// writes of the namespace's objects returned after the request (they were
// in flight when it came: at most --apply-concurrency; none starts after).
type Suspended struct {
	*Suspension
	WritesAfterRequest int64
}

// Resume ends the instance's suspension, by by: the annotations are
// removed. Resuming an instance that is not suspended is not an error.
func (r *Reconciler) Resume(ctx context.Context, by string) error {
	by = strings.TrimSpace(by)
	if r.cfg.DryRun {
		return fmt.Errorf("%w: this process runs with --dry-run and writes nothing, its inventory included", ErrSuspend)
	}
	if err := suspend.CheckAuthor(by); err != nil {
		return err
	}
	cm, err := inventoryStore{r}.get(ctx)
	if err != nil {
		return err
	}
	if cm == nil || r.mem.readSuspension(cm, time.Now(), r.cfg.suspendMax()).Active == nil && !suspend.Present(cm.GetAnnotations()) {
		return nil
	}
	if err := (suspensionStore{r}).patch(ctx, suspend.Removal(), ""); err != nil {
		return err
	}
	if by == "" {
		by = "(unknown)"
	}
	r.mem.resumed(by)
	r.gate.release()
	r.log.InfoContext(ctx, "resumed", "by", by)
	return nil
}
