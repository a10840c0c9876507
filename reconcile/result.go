package reconcile

import (
	"fmt"
	"time"

	"recond.dev/recond/reconcile/diff"
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
)

// Phases lists every phase in tick order.
var Phases = []Phase{PhaseRead, PhaseObserve, PhaseDiff, PhaseApply}

// Reason is the closed set of causes a failed phase is classified into.
type Reason string

// Every reason a phase can fail with.
const (
	ReasonAuth        Reason = "auth"
	ReasonForbidden   Reason = "forbidden"
	ReasonNotFound    Reason = "not_found"
	ReasonInvalid     Reason = "invalid"
	ReasonConflict    Reason = "conflict"
	ReasonTimeout     Reason = "timeout"
	ReasonUnavailable Reason = "unavailable"
	ReasonOther       Reason = "other"
)

// Reasons lists every Reason, so that labelled series can be pre-initialised.
var Reasons = []Reason{
	ReasonAuth, ReasonForbidden, ReasonNotFound, ReasonInvalid,
	ReasonConflict, ReasonTimeout, ReasonUnavailable, ReasonOther,
}

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
}

// Operation is one write to the API server that the apply phase made (or
// would have made, in a dry run).
type Operation struct {
	Kind, Name string
	Action     diff.Action // Create, Update or Delete
	Err        error       // nil when it succeeded
	Duration   time.Duration
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
}

// Result is everything a tick did. Logs, metrics and spans read it.
type Result struct {
	Revision string // commit SHA read; "" when the read phase failed before resolving it
	Fetched  bool   // the read phase fetched from the remote (false: already had the revision)
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
	// Observe is what observing cost, when the live state comes from a
	// cache (Config.Live implements LiveCost); nil otherwise.
	Observe *ObserveCost
	// Heals are the drifts a watch showed that this tick's writes restored;
	// BackingOff the objects ("Kind/name") whose self-heal was held back
	// because another manager keeps changing them.
	Heals      []Heal
	BackingOff []string
}

// Failure returns the error of the failed phase, or nil.
func (r *Result) Failure() *PhaseError {
	for _, p := range r.Phases {
		if p.Err != nil {
			return p.Err
		}
	}
	return nil
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
