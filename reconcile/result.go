package reconcile

import (
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"recond.dev/recond/internal/reason"
	"recond.dev/recond/reconcile/diff"
	"recond.dev/recond/reconcile/health"
	"recond.dev/recond/reconcile/source"
)

// Phase names one step of a tick. The values are a contract: span names,
// metric labels and log fields use them.
type Phase string

// The phases of a tick, in the order they run.
const (
	PhaseRead    Phase = "read"
	PhaseObserve Phase = "observe"
	PhaseDiff    Phase = "diff"
	PhaseApply   Phase = "apply"
	PhaseHealth  Phase = "health"
)

// Phases lists every phase in tick order.
var Phases = []Phase{PhaseRead, PhaseObserve, PhaseDiff, PhaseApply, PhaseHealth}

// Reason is the closed set of causes a failed phase is classified into
// (internal/reason: the one set every package reports in).
type Reason = reason.Reason

// Every reason a phase can fail with.
const (
	ReasonAuth        = reason.Auth
	ReasonForbidden   = reason.Forbidden
	ReasonNotFound    = reason.NotFound
	ReasonInvalid     = reason.Invalid
	ReasonConflict    = reason.Conflict
	ReasonTimeout     = reason.Timeout
	ReasonUnavailable = reason.Unavailable
	ReasonOther       = reason.Other
	// ReasonHook: a chart's hook failed or ran out of time (HookError).
	ReasonHook = reason.Hook
	// ReasonImmutable: the API server refused a change to a field that
	// cannot change once set (ImmutableError).
	ReasonImmutable = reason.Immutable
)

// Reasons lists every Reason, so that labelled series can be pre-initialised.
var Reasons = reason.All

// Outcome is how a tick ended.
type Outcome string

// Every outcome of a tick.
const (
	// OutcomeConverged: every phase ran, nothing differed, nothing was written.
	OutcomeConverged Outcome = "converged"
	// OutcomeApplied: every phase ran and at least one object was written or pruned.
	OutcomeApplied Outcome = "applied"
	// OutcomeOutOfSync: every phase ran, differences were found but not
	// written (--self-heal=false on an unchanged revision, or --dry-run).
	OutcomeOutOfSync Outcome = "out_of_sync"
	// OutcomeFailed: a phase failed; Result.Failure says which and why.
	OutcomeFailed Outcome = "failed"
)

// Outcomes lists every Outcome.
var Outcomes = []Outcome{OutcomeConverged, OutcomeApplied, OutcomeOutOfSync, OutcomeFailed}

// PhaseError is the error of a failed phase: which phase, the reason it was
// classified into, and the cause.
type PhaseError struct {
	Phase  Phase
	Reason Reason
	Err    error
}

func (e *PhaseError) Error() string {
	return fmt.Sprintf("%s failed (%s): %v", e.Phase, e.Reason, e.Err)
}

// Unwrap returns the cause.
func (e *PhaseError) Unwrap() error { return e.Err }

// PhaseResult is what one phase that ran left behind.
type PhaseResult struct {
	Phase    Phase
	Duration time.Duration
	Err      *PhaseError // nil when the phase succeeded
	// Aside is set for a phase whose failure is not the tick's (health):
	// Failure and the outcome ignore it; metrics, spans and logs do not.
	Aside bool
	// Abandoned is set when the phase did not return within AbandonAfter
	// of the tick's deadline: the tick failed with reason timeout and went
	// on without it (recond_loop_stalls_total).
	Abandoned bool
	// Panicked is set when the phase panicked (recond_panics_total).
	Panicked bool
}

// Operation is one write to the API server that the apply phase made (or
// would have made, in a dry run).
type Operation struct {
	Kind, Name string
	Action     diff.Action // Create, Update or Delete
	Err        error       // nil when it succeeded
	Duration   time.Duration
	// APIVersion, UID and ResourceVersion complete the reference to the
	// object (UID empty for a create that failed; the version written, or
	// the live one when the write failed).
	APIVersion      string
	UID             types.UID
	ResourceVersion string
	// Fields are the paths of the fields an update changed (no values).
	Fields []string
	// Recreated is set on an update made by deleting the object and
	// creating it anew (an immutable field changed; recond.dev/force:
	// recreate).
	Recreated bool
}

// Ref is the object the operation wrote.
func (o Operation) Ref() ObjectRef {
	return ObjectRef{APIVersion: o.APIVersion, Kind: o.Kind, Name: o.Name, UID: o.UID, ResourceVersion: o.ResourceVersion}
}

// ObjectRef names one object of the namespace. ResourceVersion is the
// version the reference is about (after a write, the written one), so that
// two Events about two versions of an object are never folded into one
// series.
type ObjectRef struct {
	APIVersion, Kind, Name string
	UID                    types.UID
	ResourceVersion        string
}

// String is "Kind/name".
func (o ObjectRef) String() string { return o.Kind + "/" + o.Name }

// Key tells objects apart across API groups: "Kind.group/name" ("Kind/name"
// for the core group), whatever the version.
func (o ObjectRef) Key() string {
	group, _, found := strings.Cut(o.APIVersion, "/")
	if !found || group == "" {
		return o.Kind + "/" + o.Name
	}
	return o.Kind + "." + group + "/" + o.Name
}

// ObjectHealth is the health of one object recond manages.
type ObjectHealth struct {
	Ref    ObjectRef
	Status health.Status
	// Message says why, for any status but current.
	Message string
	// Since is when this process first saw the object in Status.
	Since time.Time
	// Revision is the object's recond.dev/revision annotation (the commit
	// at which recond last wrote it); Changed when recond's apply last
	// changed it (its managedFields entry; zero when unknown).
	Revision string
	Changed  time.Time
}

// Health is what the health phase found: every object of the desired set,
// in desired order (health.Missing for one that does not exist), and the
// instance's health (the worst).
type Health struct {
	Status  health.Instance
	Objects []ObjectHealth
	// Counts are the objects per status.
	Counts map[health.Status]int
}

// Unhealthy returns the objects that are not current.
func (h *Health) Unhealthy() []ObjectHealth {
	var out []ObjectHealth
	for _, o := range h.Objects {
		if o.Status != health.Current {
			out = append(out, o)
		}
	}
	return out
}

// Counts are the object counts of a tick.
type Counts struct {
	Desired int // objects in Git at the revision
	Drifted int // objects that differed from Git (create, update or delete)
	Created int
	Updated int
	Pruned  int
	Managed int // objects recond owns after the tick
	// Terminating is how many owned objects are being deleted (a
	// deletionTimestamp set, held by a finalizer): counted, never pruned again.
	Terminating int
	// Equivalent is how many objects the local diff saw differ although the
	// server showed that applying them changes nothing: a normalisation gap,
	// reported converged instead of rewritten.
	Equivalent int
	// Refused is how many writes (creates, updates, prunes) failed after
	// the validating dry runs passed: refused by something the dry runs do
	// not see (a ResourceQuota, admission that rejects only real writes),
	// or the call itself failed. Ops holds each with its error.
	Refused int
	// NotWritten is how many changes the apply phase meant to make and
	// never attempted because it stopped (a refused write ends the apply
	// after its wave; a stop or a failure ends it at once).
	NotWritten int
	// GeneratedOnce is how many desired objects a chart's key or
	// certificate maker (or a random salt) made part of: created when
	// missing, never updated because their render cannot be repeated.
	GeneratedOnce int
	// Skipped is how many objects an opt-out annotation held back, in
	// whole or in part (Result.Skipped lists them); Orphaned how many left
	// Git with recond.dev/prune: disabled and lost recond's labels instead
	// of being deleted.
	Skipped, Orphaned int
	// Deferred is how many prunes the server refused because the object
	// changed after the tick observed it (a resourceVersion precondition):
	// not deleted, judged again by the next tick (Result.Deferred).
	Deferred int
}

// Written is how many objects the tick wrote (created, updated, pruned).
func (c Counts) Written() int { return c.Created + c.Updated + c.Pruned }

// Partial reports whether the tick's apply wrote some of what it meant to
// and not the rest: the namespace is between two revisions.
func (r *Result) Partial() bool {
	return r.Counts.Written() > 0 && (r.Counts.Refused > 0 || r.Counts.NotWritten > 0)
}

// Result is everything a tick did. Logs, metrics and spans read it.
type Result struct {
	// ID numbers the ticks of this process from 1 (Reconciler.Request
	// returns the ID of the tick that will serve a request).
	ID       uint64
	Revision string // commit SHA read; "" when the read phase failed before resolving it
	Fetched  bool   // the read phase fetched from the remote (false: already had the revision)
	// Superseded counts the renders the read phase stopped because the
	// followed ref moved while they ran (it then read the newer revision).
	Superseded int
	// HooksWaiting are the chart hooks ("Kind/name") still running when
	// the tick ended: the revision's main wave waits for them.
	HooksWaiting []string
	// Hooks is what each hook of the revision would do (a plan: recond
	// diff, --dry-run): create its object, delete the one an earlier run
	// left first, or be refused by the write gate.
	Hooks []HookPlan `json:",omitempty"`
	// Chart is the Helm chart the revision rendered (name, version, values
	// files), when --path holds one; nil otherwise.
	Chart    *source.Chart
	Start    time.Time
	Duration time.Duration
	Phases   []PhaseResult // the phases that ran, in order
	Changes  []diff.Change // what the diff phase found (create, update, delete; unchanged omitted)
	Ops      []Operation   // writes made by the apply phase
	// Terminating and Equivalent name ("Kind/name") the objects that
	// Counts.Terminating and Counts.Equivalent count.
	Terminating, Equivalent []string
	Counts                  Counts
	Outcome                 Outcome
	DryRun                  bool
	// Trigger is what asked for the tick.
	Trigger Trigger
	// Quiet is set when the tick reused what the last full tick found
	// (nothing the watches see changed since, at the same revision): its
	// cost does not grow with the number of objects.
	Quiet bool
	// Observe is what observing cost, when the live state comes from a
	// cache (Config.Live implements LiveCost); nil otherwise.
	Observe *ObserveCost
	// Heals are the drifts a watch showed that this tick's writes restored;
	// BackingOff the objects ("Kind/name") whose self-heal was held back
	// because another manager keeps changing them.
	Heals      []Heal
	BackingOff []string
	// Rejected are the writes the validating dry runs refused (nothing was
	// written), every one of them, not only the first; Err says why. Writes
	// refused after validation (Counts.Refused) are in Ops, with their Err.
	Rejected []Operation
	// Inventory is recond's inventory ConfigMap for the instance (UID
	// empty before it was first written): instance Events are about it.
	Inventory ObjectRef
	// RevisionApplied is set when this tick recorded Revision as applied in
	// full and it was not the revision applied before.
	RevisionApplied bool
	// Health is what the health phase found; nil when it did not run.
	Health *Health
	// Suspension is the operator's suspension in force at the tick's end
	// (nil: none): the tick wrote, pruned and healed nothing.
	Suspension *Suspension
	// ResumedBy names who ended a suspension through Resume since the
	// tick before ("" when nobody did: it ended by itself, or its
	// annotations were removed).
	ResumedBy string
	// Skipped are the objects the per-object opt-outs held back (optout.go).
	Skipped []Skip
	// Orphaned are the objects that left Git with recond.dev/prune:
	// disabled: not deleted, recond's labels removed.
	Orphaned []ObjectRef
	// Deferred are the prunes left for the next tick: the object changed
	// after it was observed.
	Deferred []ObjectRef
}

// Failure returns the error of the failed phase, or nil. A phase run aside
// (health) never fails the tick.
func (r *Result) Failure() *PhaseError {
	for _, p := range r.Phases {
		if p.Err != nil && !p.Aside {
			return p.Err
		}
	}
	return nil
}

// FailureText is the failure for people who may not read Secrets (an
// Event's note, the status page): the phase, reason and error, but only the
// API's reason when a failed diff or apply touched a Secret, whose value
// the API server's error may quote. "" when the tick did not fail.
func (r *Result) FailureText() string {
	f := r.Failure()
	if f == nil {
		return ""
	}
	if f.Phase == PhaseDiff || f.Phase == PhaseApply {
		for _, c := range r.Changes {
			if c.Kind == "Secret" {
				return secretFailure(f)
			}
		}
		for _, ops := range [][]Operation{r.Ops, r.Rejected} {
			for _, op := range ops {
				if op.Kind == "Secret" {
					return secretFailure(f)
				}
			}
		}
	}
	return f.Error()
}

func secretFailure(f *PhaseError) string {
	// What recond itself said of a Secret's keys carries no value: shown.
	if keys := secretKeyErrors(f.Err); len(keys) > 0 {
		return fmt.Sprintf("%s failed (%s): %s", f.Phase, f.Reason, strings.Join(keys, "; "))
	}
	return fmt.Sprintf("%s failed (%s): %s (the tick wrote or compared a Secret: the error is in recond's log only)",
		f.Phase, f.Reason, apierrors.ReasonForError(f.Err))
}

// secretKeyErrors are the texts of the SecretKeyErrors err is made of,
// when it is made of nothing else (one, or a RejectedError of them only).
func secretKeyErrors(err error) []string {
	errs := []error{err}
	var rej *RejectedError
	if errors.As(err, &rej) {
		errs = rej.Errs
	}
	var out []string
	for _, e := range errs {
		var k *SecretKeyError
		if !errors.As(e, &k) {
			return nil
		}
		out = append(out, k.Error())
	}
	return out
}

// ErrorText is an operation's error for people who may not read Secrets:
// for a Secret, only the API's reason.
func (o Operation) ErrorText() string {
	switch {
	case o.Err == nil:
		return ""
	case o.Kind == "Secret":
		if keys := secretKeyErrors(o.Err); len(keys) > 0 {
			return strings.Join(keys, "; ")
		}
		return fmt.Sprintf("%s (details of a Secret are in recond's log only)", apierrors.ReasonForError(o.Err))
	}
	return o.Err.Error()
}

// PhaseDuration returns how long phase p took, or 0 if it did not run.
func (r *Result) PhaseDuration(p Phase) time.Duration {
	for _, pr := range r.Phases {
		if pr.Phase == p {
			return pr.Duration
		}
	}
	return 0
}

// Err returns the failure as an error (nil when the tick did not fail).
func (r *Result) Err() error {
	if f := r.Failure(); f != nil {
		return f
	}
	return nil
}
