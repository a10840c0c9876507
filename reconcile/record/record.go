package record

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"recond.dev/recond/internal/reason"
	"recond.dev/recond/reconcile/health"
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
	Reason reason.Reason
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

// ObserveCost is what observing cost a tick (or, from LiveCost, what it has
// cost since the start).
type ObserveCost struct {
	// Calls is API requests made by the cache on behalf of the tick (store
	// misses); its watches are not counted.
	Calls int64
	// SyncWait is the time waited for caches to sync (first use of a kind).
	SyncWait time.Duration
	// CacheAge is the age of the stalest cache: the time since it last saw
	// an event or a bookmark.
	CacheAge time.Duration
	// Restarts is caches restarted because they had seen nothing for the
	// stale limit (--watch-stale-after): a stalled watch, or a quiet kind;
	// or because a check found their store behind (--watch-check-every).
	// A tick's counts those since the last tick.
	Restarts int64
}

// UnhealthyList names unhealthy objects with their health and why:
// "Deployment/web (failed: Progress deadline exceeded)".
func UnhealthyList(objs []ObjectHealth) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		s := o.Ref.String() + " (" + string(o.Status)
		if o.Message != "" {
			s += ": " + o.Message
		}
		out = append(out, s+")")
	}
	return out
}
