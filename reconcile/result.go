package reconcile

import (
	"recond.dev/recond/internal/reason"
	"recond.dev/recond/reconcile/record"
)

// The vocabulary of a tick's result is reconcile/record's; these are the
// names the engine's callers use.
type (
	// Phase names one step of a tick (record.Phase).
	Phase = record.Phase
	// Outcome is how a tick ended (record.Outcome).
	Outcome = record.Outcome
	// PhaseError is the error of a failed phase (record.PhaseError).
	PhaseError = record.PhaseError
	// PhaseResult is what one phase that ran left behind (record.PhaseResult).
	PhaseResult = record.PhaseResult
	// ObjectRef names one object of the namespace (record.ObjectRef).
	ObjectRef = record.ObjectRef
	// ObjectHealth is the health of one object recond manages.
	ObjectHealth = record.ObjectHealth
	// Health is what the health phase found (record.Health).
	Health = record.Health
	// Counts are the object counts of a tick (record.Counts).
	Counts = record.Counts
	// ObserveCost is what observing cost a tick (record.ObserveCost).
	ObserveCost = record.ObserveCost
	// Operation is one write the apply phase made (record.Operation).
	Operation = record.Operation
	// Result is everything a tick did (record.Result).
	Result = record.Result
	// LogObserver writes a tick's lines (record.LogObserver).
	LogObserver = record.LogObserver
)

// The phases of a tick, in the order they run.
const (
	PhaseRead    = record.PhaseRead
	PhaseObserve = record.PhaseObserve
	PhaseDiff    = record.PhaseDiff
	PhaseApply   = record.PhaseApply
	PhaseHealth  = record.PhaseHealth
)

// Phases lists every phase in tick order.
var Phases = record.Phases

// Every outcome of a tick.
const (
	OutcomeConverged = record.OutcomeConverged
	OutcomeApplied   = record.OutcomeApplied
	OutcomeOutOfSync = record.OutcomeOutOfSync
	OutcomeFailed    = record.OutcomeFailed
)

// Outcomes lists every Outcome.
var Outcomes = record.Outcomes

// UnhealthyList names unhealthy objects with their health and why.
func UnhealthyList(objs []ObjectHealth) []string { return record.UnhealthyList(objs) }

// The caps of one difference line (record.MaxDifferenceFields, ...).
const (
	MaxDifferenceFields = record.MaxDifferenceFields
	MaxDifferenceBytes  = record.MaxDifferenceBytes
	MaxDifferenceValue  = record.MaxDifferenceValue
)

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
