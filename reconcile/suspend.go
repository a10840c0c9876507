package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"recond.dev/recond/reconcile/cluster"
	"recond.dev/recond/reconcile/keys"
)

// The annotations on an instance's inventory ConfigMap that hold its
// suspension: one truth for every process of the instance (a restart, a
// standby that takes over), for `recond suspend`, POST /api/v1/suspend and
// `kubectl annotate` alike. The names are a contract.
const (
	// AnnotationSuspendedUntil is when the suspension ends by itself
	// (RFC 3339). Missing, unreadable or further than --suspend-max away
	// while another suspension annotation is set, it is written as
	// --suspend-max from when recond first saw the suspension.
	AnnotationSuspendedUntil = keys.AnnotationSuspendedUntil
	// AnnotationSuspendReason says why, in the operator's words.
	AnnotationSuspendReason = keys.AnnotationSuspendReason
	// AnnotationSuspendedBy says who.
	AnnotationSuspendedBy = keys.AnnotationSuspendedBy
)

// suspendAnnotations are the annotations of a suspension.
var suspendAnnotations = []string{AnnotationSuspendedUntil, AnnotationSuspendReason, AnnotationSuspendedBy}

// DefaultSuspendMax is how long a suspension lasts at most (--suspend-max):
// a loop is never stopped by oversight for longer.
const DefaultSuspendMax = 24 * time.Hour

// suspendManager is the field manager of the suspension's annotations: not
// recond's own, so that recond's apply of the inventory never removes them.
const suspendManager = "recond-suspend"

// maxSuspendText bounds the reason and the author (an annotation is
// meant to be read on one screen).
const maxSuspendText = 1024

// Suspension is an operator's stop of the loop's writes: while it lasts,
// every tick still reads, observes, diffs and assesses health, and writes,
// prunes and heals nothing.
type Suspension struct {
	// Until is when the suspension ends by itself.
	Until time.Time `json:"until"`
	// Reason and By are the operator's words: why, and who.
	Reason string `json:"reason"`
	By     string `json:"by"`
}

// Active reports whether the suspension is in force at now.
func (s *Suspension) Active(now time.Time) bool { return s != nil && now.Before(s.Until) }

func (s *Suspension) String() string {
	if s == nil {
		return "not suspended"
	}
	return fmt.Sprintf("suspended until %s by %s: %s", s.Until.UTC().Format(time.RFC3339), s.By, s.Reason)
}

// suspensionState is what a tick knows of the suspension, from the
// inventory's annotations.
type suspensionState struct {
	// Active is the suspension in force (nil: none).
	Active *Suspension
	// Stale is set when the annotations need writing: a suspension that
	// ended (removed), or one whose end was missing, unreadable or too far
	// (written as Active.Until).
	Stale bool
	// Note says what was wrong with them, for the log.
	Note string
	// rv is the inventory's resourceVersion they were read at: what
	// settling them is conditional on.
	rv string
}

// maxClockSkew is how far past --suspend-max from now an end may be and
// still be taken as written: the process that wrote it may run a little
// ahead.
const maxClockSkew = time.Minute

// printable is an operator's text as recond shows it: no control
// characters (a newline or a terminal escape in an Event note, a log or a
// terminal), at most maxSuspendText bytes, trimmed.
func printable(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
	s = strings.TrimSpace(s)
	if len(s) > maxSuspendText {
		s = strings.ToValidUTF8(s[:maxSuspendText], "") + "…"
	}
	return s
}

// suspensionMemo remembers when this process first saw a suspension
// without a readable end, so that its end does not move from tick to tick
// until it is written.
type suspensionMemo struct {
	mu    sync.Mutex
	first map[string]time.Time // by the annotations' values
	// resumedBy is who resumed through Resume, for the next tick's Result.
	resumedBy string
	// last is the suspension the last reading found in force.
	last *Suspension
}

// readSuspension reads the suspension from cm's annotations (cm nil: no
// inventory, no suspension) at now, with max the longest a suspension may
// last.
func (m *suspensionMemo) read(cm *unstructured.Unstructured, now time.Time, max time.Duration) suspensionState {
	var ann map[string]string
	if cm != nil {
		ann = cm.GetAnnotations()
	}
	until, hasUntil := ann[AnnotationSuspendedUntil]
	reason, hasReason := ann[AnnotationSuspendReason]
	by, hasBy := ann[AnnotationSuspendedBy]
	if !hasUntil && !hasReason && !hasBy {
		m.mu.Lock()
		m.first = nil // no suspension: nothing to remember
		m.mu.Unlock()
		return suspensionState{}
	}
	s := &Suspension{Reason: printable(reason), By: printable(by)}
	if s.Reason == "" {
		s.Reason = "(no reason given)"
	}
	if s.By == "" {
		s.By = "(unknown)"
	}
	rv := cm.GetResourceVersion()
	// RFC 3339 allows a lower-case t and z; Go's layout does not.
	t, err := time.Parse(time.RFC3339, strings.ToUpper(strings.TrimSpace(until)))
	t = t.UTC() // one zone, so that two readings of one end are equal
	switch {
	case err == nil && !now.Before(t):
		// Ended: the annotations go.
		return suspensionState{Stale: true, rv: rv}
	case err == nil && t.Sub(now) <= max+maxClockSkew:
		s.Until = t
		return suspensionState{Active: s, rv: rv}
	}
	// No readable end, or one too far: --suspend-max from when this
	// process first saw it, written back so that every process agrees.
	key := until + "\x00" + reason + "\x00" + by
	m.mu.Lock()
	if m.first == nil {
		m.first = map[string]time.Time{}
	}
	first, ok := m.first[key]
	if !ok {
		first = now
		m.first[key] = now
	}
	m.mu.Unlock()
	s.Until = first.Add(max).UTC().Truncate(time.Second)
	note := fmt.Sprintf("%s %q is not an RFC 3339 time", AnnotationSuspendedUntil, until)
	switch {
	case !hasUntil:
		note = AnnotationSuspendedUntil + " is missing"
	case err == nil:
		note = fmt.Sprintf("%s %s is further than --suspend-max (%s) away", AnnotationSuspendedUntil, until, max)
	}
	if !now.Before(s.Until) {
		return suspensionState{Stale: true, Note: note, rv: rv}
	}
	return suspensionState{Active: s, Stale: true, Note: note + "; the suspension lasts --suspend-max", rv: rv}
}

// noteSuspension reads the suspension from the inventory ConfigMap the
// tick read (cm; nil: there is none), for st: the inventory is read at
// every tick anyway (loadInventory), so this costs no request.
func (r *Reconciler) noteSuspension(st *State, cm *unstructured.Unstructured) {
	st.suspension = r.suspend.read(cm, time.Now(), r.suspendMax())
	st.suspensionRead = true
	r.suspend.mu.Lock()
	r.suspend.last = st.suspension.Active
	r.suspend.mu.Unlock()
}

// lastKnown is the suspension the last tick that read the inventory found
// in force (nil: none).
func (m *suspensionMemo) lastKnown() *Suspension {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last
}

// freshSuspension reads the suspension from the API server.
func (r *Reconciler) freshSuspension(ctx context.Context, st *State) error {
	cm, err := r.getInventory(ctx)
	if err != nil {
		return err
	}
	r.noteSuspension(st, cm)
	// Read from the API server by a tick that started after a suspension
	// asked of this process: the reading now decides.
	r.gate.settled(st.tick)
	return nil
}

func (r *Reconciler) suspendMax() time.Duration {
	if r.cfg.SuspendMax > 0 {
		return r.cfg.SuspendMax
	}
	return DefaultSuspendMax
}

// settleSuspension writes what the tick found stale in the suspension's
// annotations: an ended suspension's are removed, a missing or unreadable
// end is written. It is part of the apply phase: a dry run writes nothing.
func (r *Reconciler) settleSuspension(ctx context.Context, st *State) error {
	if !st.suspension.Stale || r.cfg.DryRun {
		return nil
	}
	if err := r.mayWrite(); err != nil {
		return err
	}
	ann := map[string]any{}
	if s := st.suspension.Active; s != nil {
		ann[AnnotationSuspendedUntil] = s.Until.UTC().Format(time.RFC3339)
	} else {
		for _, a := range suspendAnnotations {
			ann[a] = nil
		}
	}
	// Only over what was read: a suspension made since is not undone.
	err := r.patchInventoryAnnotations(ctx, ann, st.suspension.rv)
	if apierrors.IsConflict(err) {
		r.log.InfoContext(ctx, "the suspension changed while the tick read it; reading it again")
		if err := r.freshSuspension(ctx, st); err != nil {
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

// patchInventoryAnnotations merges ann (a nil value removes one) into the
// inventory ConfigMap's annotations; with rv, only while the ConfigMap is
// at that resourceVersion (a conflict otherwise).
func (r *Reconciler) patchInventoryAnnotations(ctx context.Context, ann map[string]any, rv string) error {
	meta := map[string]any{"annotations": ann}
	if rv != "" {
		meta["resourceVersion"] = rv
	}
	patch, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return err
	}
	w := cluster.Write{Purpose: cluster.PurposeSuspension, GVK: configMapGVK, Name: inventoryName(r.cfg.Name)}
	if _, err := r.kube.MergePatch(ctx, w, patch, suspendManager); err != nil {
		return fmt.Errorf("write the suspension on the inventory: %w", err)
	}
	return nil
}

// ErrSuspend is a request to suspend that cannot be taken as given (no
// reason, a duration over --suspend-max).
var ErrSuspend = errors.New("bad suspension")

// MinSuspend is the shortest suspension recond takes: its end is written
// to the second, and a shorter one would end before it is answered.
const MinSuspend = time.Second

// CheckSuspendFor says why d, asked for as a suspension's length, is
// refused (nil: it is not; --suspend-max is Suspend's to check). The
// one rule of the API, `recond suspend --for` and Suspend: a length named
// as 0 is refused, never taken as --suspend-max.
func CheckSuspendFor(d time.Duration) error {
	if d < MinSuspend {
		return fmt.Errorf("%w: %s: a duration of at least %s", ErrSuspend, d, MinSuspend)
	}
	return nil
}

// Suspend suspends the instance for d (0: --suspend-max), by by, for
// reason, writing the annotations on its inventory ConfigMap (created when
// missing). The next tick writes nothing; call Request for it to come at
// once.
func (r *Reconciler) Suspend(ctx context.Context, by, reason string, d time.Duration) (*Suspended, error) {
	reason, by = strings.TrimSpace(reason), strings.TrimSpace(by)
	max := r.suspendMax()
	switch {
	case r.cfg.DryRun:
		return nil, fmt.Errorf("%w: this process runs with --dry-run and writes nothing, its inventory included", ErrSuspend)
	case printable(reason) != reason || printable(by) != by:
		return nil, fmt.Errorf("%w: reason and author are one line of text without control characters", ErrSuspend)
	case reason == "":
		return nil, fmt.Errorf("%w: a reason is required (it is shown to whoever wonders why the loop does not write)", ErrSuspend)
	case len(reason) > maxSuspendText || len(by) > maxSuspendText || !utf8.ValidString(reason) || !utf8.ValidString(by):
		return nil, fmt.Errorf("%w: reason and author are UTF-8 text of at most %d bytes", ErrSuspend, maxSuspendText)
	case d != 0 && CheckSuspendFor(d) != nil:
		return nil, CheckSuspendFor(d)
	case d > max:
		return nil, fmt.Errorf("%w: %s is longer than --suspend-max (%s)", ErrSuspend, d, max)
	case d == 0:
		d = max
	}
	if by == "" {
		by = "(unknown)"
	}
	s := &Suspension{Until: time.Now().Add(d).UTC().Truncate(time.Second), Reason: reason, By: by}
	cm := r.inventoryObject()
	cm.SetAnnotations(map[string]string{
		AnnotationSuspendedUntil: s.Until.Format(time.RFC3339),
		AnnotationSuspendReason:  reason,
		AnnotationSuspendedBy:    by,
	})
	// From now on this process writes no object, before the annotations
	// are even written: a tick writing now stops at its next write.
	finished := r.gate.holdWrites(s, r.Progress().Started)
	if _, err := r.kube.ApplyAs(ctx, cluster.Write{Purpose: cluster.PurposeSuspension, Object: cm}, suspendManager); err != nil {
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
	if len(by) > maxSuspendText || !utf8.ValidString(by) || printable(by) != by {
		return fmt.Errorf("%w: the author is UTF-8 text of at most %d bytes", ErrSuspend, maxSuspendText)
	}
	cm, err := r.getInventory(ctx)
	if err != nil {
		return err
	}
	if cm == nil || r.suspend.read(cm, time.Now(), r.suspendMax()).Active == nil && !hasSuspendAnnotations(cm) {
		return nil
	}
	ann := map[string]any{}
	for _, a := range suspendAnnotations {
		ann[a] = nil
	}
	if err := r.patchInventoryAnnotations(ctx, ann, ""); err != nil {
		return err
	}
	if by == "" {
		by = "(unknown)"
	}
	r.suspend.mu.Lock()
	r.suspend.resumedBy = by
	r.suspend.last = nil
	r.suspend.mu.Unlock()
	r.gate.release()
	r.log.InfoContext(ctx, "resumed", "by", by)
	return nil
}

func hasSuspendAnnotations(cm *unstructured.Unstructured) bool {
	ann := cm.GetAnnotations()
	for _, a := range suspendAnnotations {
		if _, ok := ann[a]; ok {
			return true
		}
	}
	return false
}

// takeResumedBy returns who resumed through Resume since the last call.
func (m *suspensionMemo) takeResumedBy() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	by := m.resumedBy
	m.resumedBy = ""
	return by
}
