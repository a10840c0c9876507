package events

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"

	"recond.dev/recond/internal/revision"
	"recond.dev/recond/reconcile"
	"recond.dev/recond/reconcile/diff"
	"recond.dev/recond/reconcile/health"
)

// The reasons of recond's Events. The values are a contract: users select
// Events with `kubectl get events --field-selector reason=...`.
const (
	// ReasonCreated (Normal, on the object): recond created it.
	ReasonCreated = "Created"
	// ReasonUpdated (Normal, on the object): recond wrote it; the note names
	// the changed fields, never their values.
	ReasonUpdated = "Updated"
	// ReasonPruned (Normal, on the object): recond deleted it, as it left Git.
	ReasonPruned = "Pruned"
	// ReasonApplyFailed (Warning, on the object): a write failed or the
	// validating dry run refused it; once until a tick no longer fails it.
	ReasonApplyFailed = "ApplyFailed"
	// ReasonHealthDegraded (Warning, on the object): its health became failed.
	ReasonHealthDegraded = "HealthDegraded"
	// ReasonHealthRecovered (Normal, on the object): it is current again
	// after having failed.
	ReasonHealthRecovered = "HealthRecovered"
	// ReasonRevisionApplied (Normal, on the inventory): a revision was
	// applied in full.
	ReasonRevisionApplied = "RevisionApplied"
	// ReasonRevisionHealthy (Normal, on the inventory): the instance became
	// healthy after a revision was applied or after it was not.
	ReasonRevisionHealthy = "RevisionHealthy"
	// ReasonTickFailed (Warning, on the inventory): the first failed tick
	// of a streak.
	ReasonTickFailed = "TickFailed"
	// ReasonRecovered (Normal, on the inventory): the first successful tick
	// after a streak of failed ones.
	ReasonRecovered = "Recovered"
	// ReasonRecreated (Normal, on the object): recond deleted it and
	// created it anew, as a change to an immutable field asked
	// (recond.dev/force: recreate).
	ReasonRecreated = "Recreated"
	// ReasonOrphaned (Normal, on the object): it left Git with
	// recond.dev/prune: disabled, so recond removed its labels instead of
	// deleting it.
	ReasonOrphaned = "Orphaned"
	// ReasonSuspended (Warning, on the inventory): an operator suspended
	// the loop (or changed the suspension); the note says who, why and
	// until when.
	ReasonSuspended = "Suspended"
	// ReasonResumed (Normal, on the inventory): the suspension ended: who
	// resumed, or that it ran out.
	ReasonResumed = "Resumed"
)

// Reasons lists every reason, so that labelled series can be
// pre-initialised.
var Reasons = []string{
	ReasonCreated, ReasonUpdated, ReasonPruned, ReasonApplyFailed, ReasonHealthDegraded, ReasonHealthRecovered,
	ReasonRevisionApplied, ReasonRevisionHealthy, ReasonTickFailed, ReasonRecovered, ReasonSuspended, ReasonResumed, ReasonOrphaned, ReasonRecreated,
}

// The actions of recond's Events (what recond was doing).
const (
	ActionApply     = "Apply"
	ActionPrune     = "Prune"
	ActionAssess    = "Assess"
	ActionReconcile = "Reconcile"
	ActionSuspend   = "Suspend"
)

// NoteLimit is the API server's limit on an Event's note, in bytes.
const NoteLimit = 1024

// DefaultMaxObjectEvents is how many Events about single objects one tick
// records per reason when Options.MaxObjectEvents is 0.
const DefaultMaxObjectEvents = 100

// Intent is one Event recond means to record, about an object of the
// instance's namespace.
type Intent struct {
	Regarding reconcile.ObjectRef
	// Type is corev1.EventTypeNormal or corev1.EventTypeWarning.
	Type   string
	Reason string
	Action string
	// Note is at most NoteLimit bytes.
	Note string
}

// Transitions turns the Results of consecutive ticks into the Events of their
// transitions: an unchanged tick yields none. It remembers what it
// reported, so it is fed every tick of one process, in order; it is not
// safe for concurrent use (ticks never overlap).
type Transitions struct {
	// Max is how many Events about single objects one tick records per
	// reason (0: DefaultMaxObjectEvents); the rest become one summary on
	// the inventory.
	Max int
	// Instance names the inventory (recond-inventory-<instance>) until a
	// Result names it.
	Instance string

	// applyFailed are the objects ("Kind/name") an ApplyFailed Event was
	// recorded for and no tick has applied since.
	applyFailed map[string]bool
	// degraded are the objects a HealthDegraded Event was recorded for and
	// that were not current since.
	degraded map[string]bool
	// lastApplied is the revision known to be applied in full ("" before
	// this process knows).
	lastApplied string
	// awaitHealthy: a revision was applied, or the instance was seen not
	// healthy at a revision not yet healthy, since the last RevisionHealthy;
	// healthyAt is the revision last found or reported healthy.
	awaitHealthy bool
	healthyAt    string
	// failedTicks is the length of the current failure streak.
	failedTicks int
	streakStart time.Time
	// inventory is the last inventory reference a Result named.
	inventory reconcile.ObjectRef
	// suspended is the suspension the last tick saw in force (nil: none).
	suspended *reconcile.Suspension
}

// Next returns the Events that r, the Result of the tick after the last one
// given, means: Events about objects first (at most Max per reason, then a
// summary), then those about the instance.
func (t *Transitions) Next(r *reconcile.Result) []Intent {
	if t.applyFailed == nil {
		t.applyFailed, t.degraded = map[string]bool{}, map[string]bool{}
	}
	if t.inventory.Name == "" {
		t.inventory = reconcile.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Name: reconcile.InventoryPrefix + t.Instance}
	}
	if r.Inventory.Name != "" {
		t.inventory = r.Inventory
		if t.inventory.APIVersion == "" {
			t.inventory.APIVersion = "v1"
		}
		if t.inventory.Kind == "" {
			t.inventory.Kind = "ConfigMap"
		}
	}
	var objects []Intent
	objects = append(objects, t.writes(r)...)
	objects = append(objects, t.health(r)...)
	out := t.capped(objects)
	return append(out, t.instance(r)...)
}

// writes are the Events of the apply phase's writes and refusals.
func (t *Transitions) writes(r *reconcile.Result) []Intent {
	var out []Intent
	failed := map[string]bool{}
	for _, op := range r.Rejected {
		failed[op.Ref().Key()] = true
	}
	for _, op := range r.Ops {
		if op.Err != nil {
			failed[op.Ref().Key()] = true
		}
	}
	fail := func(op reconcile.Operation, note string) {
		key := op.Ref().Key()
		if t.applyFailed[key] {
			return
		}
		t.applyFailed[key] = true
		action := ActionApply
		if op.Action == diff.Delete {
			action = ActionPrune
		}
		out = append(out, t.about(op.Ref(), corev1.EventTypeWarning, ReasonApplyFailed, action, note))
	}
	for _, op := range r.Rejected {
		fail(op, fmt.Sprintf("%s refused by the validating dry run: %s", op.Action, errorText(op)))
	}
	// Without RevisionApplied, the writes restored the revision applied
	// before (drift) — unless some failed: then it may be a new revision
	// applied in part, which only a known last applied revision tells.
	drift := !r.RevisionApplied && r.Revision != "" &&
		(t.lastApplied == r.Revision || (t.lastApplied == "" && len(failed) == 0))
	for _, op := range r.Ops {
		key := op.Ref().Key()
		if op.Err != nil {
			fail(op, fmt.Sprintf("%s failed: %s", op.Action, errorText(op)))
			continue
		}
		if failed[key] {
			continue
		}
		delete(t.applyFailed, key)
		if r.DryRun {
			continue // nothing was written
		}
		switch op.Action {
		case diff.Create:
			out = append(out, t.about(op.Ref(), corev1.EventTypeNormal, ReasonCreated, ActionApply,
				"created"+t.atRevision(r.Revision)))
		case diff.Update:
			if op.Recreated {
				out = append(out, t.about(op.Ref(), corev1.EventTypeNormal, ReasonRecreated, ActionApply,
					"deleted and created anew: an immutable field changed (recond.dev/force: recreate)"+t.atRevision(r.Revision)))
				continue
			}
			note := "drift corrected"
			if !drift {
				note = "revision " + short(r.Revision) + " applied"
			}
			if len(op.Fields) > 0 {
				note += ": " + strings.Join(op.Fields, ", ")
			}
			out = append(out, t.about(op.Ref(), corev1.EventTypeNormal, ReasonUpdated, ActionApply, note))
		case diff.Delete:
			delete(t.degraded, key)
			out = append(out, t.about(op.Ref(), corev1.EventTypeNormal, ReasonPruned, ActionPrune,
				"pruned: not in Git"+t.atRevision(r.Revision)))
		}
	}
	for _, ref := range r.Orphaned {
		out = append(out, t.about(ref, corev1.EventTypeNormal, ReasonOrphaned, ActionPrune,
			"orphaned, not deleted: it left Git with recond.dev/prune: disabled; recond's labels removed, it is no longer managed"+t.atRevision(r.Revision)))
	}
	// A tick whose apply phase ran without failing clears the objects it no
	// longer fails: they are in Git's state, so a later failure is news.
	for _, p := range r.Phases {
		// (A suspended tick's apply wrote nothing and checked nothing.)
		if p.Phase == reconcile.PhaseApply && p.Err == nil && r.Suspension == nil {
			for key := range t.applyFailed {
				if !failed[key] {
					delete(t.applyFailed, key)
				}
			}
		}
	}
	if r.Revision != "" && !r.DryRun && r.Suspension == nil && len(failed) == 0 && phaseSucceeded(r, reconcile.PhaseApply) && t.lastApplied == "" {
		// Every write succeeded and the revision was not newly applied: it
		// was the one applied before.
		t.lastApplied = r.Revision
	}
	return out
}

// health are the Events of the objects' health transitions.
func (t *Transitions) health(r *reconcile.Result) []Intent {
	if r.Health == nil {
		return nil
	}
	if len(t.degraded) == 0 && r.Health.Counts[health.Failed] == 0 {
		// Nothing failed, nothing was: the common converged tick costs no
		// pass over its objects.
		return nil
	}
	var out []Intent
	present := map[string]bool{}
	for _, o := range r.Health.Objects {
		key := o.Ref.Key()
		present[key] = true
		switch {
		case o.Status == health.Failed && !t.degraded[key]:
			t.degraded[key] = true
			note := o.Message
			if note == "" {
				note = string(health.Failed)
			}
			out = append(out, t.about(o.Ref, corev1.EventTypeWarning, ReasonHealthDegraded, ActionAssess, note))
		case o.Status == health.Current && t.degraded[key]:
			delete(t.degraded, key)
			out = append(out, t.about(o.Ref, corev1.EventTypeNormal, ReasonHealthRecovered, ActionAssess,
				"current again"+t.atRevision(r.Revision)))
		}
	}
	for key := range t.degraded {
		if !present[key] {
			delete(t.degraded, key) // gone: if it comes back failed, that is news
		}
	}
	return out
}

// instance are the Events about the instance, on its inventory.
func (t *Transitions) instance(r *reconcile.Result) []Intent {
	var out []Intent
	if r.RevisionApplied && !r.DryRun && r.Revision != "" {
		t.lastApplied = r.Revision
		t.awaitHealthy = true
		out = append(out, t.about(t.inventory, corev1.EventTypeNormal, ReasonRevisionApplied, ActionApply,
			fmt.Sprintf("revision %s applied: %d created, %d updated, %d pruned",
				short(r.Revision), r.Counts.Created, r.Counts.Updated, r.Counts.Pruned)))
	}
	if h := r.Health; h != nil {
		inPlace := t.lastApplied != "" && r.Revision == t.lastApplied
		switch {
		case h.Status != health.Healthy:
			// Once per revision: a revision that was healthy and degrades
			// says so with HealthDegraded and HealthRecovered on the objects.
			if t.healthyAt != t.lastApplied || t.lastApplied == "" {
				t.awaitHealthy = true
			}
		case t.awaitHealthy && inPlace:
			// Healthy at the revision in place; not when Git's newest
			// revision failed to apply (what runs is then an older one, and
			// the objects it failed to create were not assessed).
			t.awaitHealthy, t.healthyAt = false, t.lastApplied
			out = append(out, t.about(t.inventory, corev1.EventTypeNormal, ReasonRevisionHealthy, ActionAssess,
				fmt.Sprintf("revision %s healthy: %d objects current", short(t.lastApplied), h.Counts[health.Current])))
		case !t.awaitHealthy && inPlace:
			t.healthyAt = t.lastApplied // found healthy: a process that starts so stays silent
		}
	}
	out = append(out, t.suspension(r)...)
	if f := r.Failure(); f != nil {
		if t.failedTicks == 0 {
			t.streakStart = r.Start
			out = append(out, t.about(t.inventory, corev1.EventTypeWarning, ReasonTickFailed, ActionReconcile, r.FailureText()))
		}
		t.failedTicks++
	} else if t.failedTicks > 0 {
		note := fmt.Sprintf("tick succeeded after %d failed %s", t.failedTicks, plural(t.failedTicks, "tick", "ticks"))
		if !t.streakStart.IsZero() {
			note += " since " + t.streakStart.UTC().Format(time.RFC3339)
		}
		t.failedTicks = 0
		out = append(out, t.about(t.inventory, corev1.EventTypeNormal, ReasonRecovered, ActionReconcile, note))
	}
	return out
}

// suspension are the Events of a suspension that began, changed or ended.
// A process that starts while one is in force says so once.
func (t *Transitions) suspension(r *reconcile.Result) []Intent {
	prev, cur := t.suspended, r.Suspension
	t.suspended = cur
	switch {
	case cur != nil && (prev == nil || !prev.Until.Equal(cur.Until) || prev.Reason != cur.Reason || prev.By != cur.By):
		return []Intent{t.about(t.inventory, corev1.EventTypeWarning, ReasonSuspended, ActionSuspend,
			fmt.Sprintf("suspended by %s until %s: %s; ticks write, prune and heal nothing until then",
				cur.By, cur.Until.UTC().Format(time.RFC3339), cur.Reason))}
	case cur == nil && prev != nil:
		note := "resumed: the suspension's annotations were removed"
		switch {
		case r.ResumedBy != "":
			note = "resumed by " + r.ResumedBy
		case !r.Start.Before(prev.Until):
			note = "resumed: the suspension ran out at " + prev.Until.UTC().Format(time.RFC3339)
		}
		return []Intent{t.about(t.inventory, corev1.EventTypeNormal, ReasonResumed, ActionSuspend,
			fmt.Sprintf("%s (suspended by %s: %s); ticks write again", note, prev.By, prev.Reason))}
	}
	return nil
}

// capped keeps the first Max Events of each reason and replaces the rest
// with one summary per reason on the inventory, so that a first sync of
// thousands of objects records at most a few hundred Events.
func (t *Transitions) capped(evs []Intent) []Intent {
	limit := t.Max
	if limit <= 0 {
		limit = DefaultMaxObjectEvents
	}
	count := map[string]int{}
	var out []Intent
	var summaries []Intent
	for _, e := range evs {
		count[e.Reason]++
		switch n := count[e.Reason]; {
		case n <= limit:
			out = append(out, e)
		case n == limit+1:
			summaries = append(summaries, e) // its note is written below
		}
	}
	for _, s := range summaries {
		more := count[s.Reason] - limit
		summary := t.about(t.inventory, s.Type, s.Reason, s.Action,
			fmt.Sprintf("and %s more %s %s", thousands(more), plural(more, "object", "objects"), verbs[s.Reason]))
		out = append(out, summary)
	}
	return out
}

// verbs say what happened to the objects a summary counts.
var verbs = map[string]string{
	ReasonCreated:         "created",
	ReasonUpdated:         "updated",
	ReasonPruned:          "pruned",
	ReasonApplyFailed:     "failed to apply",
	ReasonHealthDegraded:  "degraded",
	ReasonHealthRecovered: "recovered",
}

// about is an Event regarding ref.
func (t *Transitions) about(ref reconcile.ObjectRef, typ, reason, action, note string) Intent {
	return Intent{Regarding: ref, Type: typ, Reason: reason, Action: action, Note: Truncate(note, NoteLimit)}
}

func (t *Transitions) atRevision(rev string) string {
	if rev == "" {
		return ""
	}
	return " at revision " + short(rev)
}

// errorText is the error of a failed write. A Secret's is reduced to the
// API server's reason: an error message may quote the value it refused.
func errorText(op reconcile.Operation) string {
	if op.Err == nil {
		return "unknown error"
	}
	return op.ErrorText()
}

// phaseSucceeded reports whether phase p ran and succeeded.
func phaseSucceeded(r *reconcile.Result, p reconcile.Phase) bool {
	for _, pr := range r.Phases {
		if pr.Phase == p {
			return pr.Err == nil
		}
	}
	return false
}

// short is a revision cut to 7 hex digits.
func short(rev string) string { return revision.Abbrev(rev, 7) }

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// thousands formats n with commas: 2900 is "2,900".
func thousands(n int) string {
	s := strconv.Itoa(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// Truncate cuts s to at most limit bytes, on a rune boundary, ending with
// "…" when it cut.
func Truncate(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	const ellipsis = "…"
	cut := limit - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}
