package record

import (
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"recond.dev/recond/reconcile/diff"
	"recond.dev/recond/reconcile/failure"
	"recond.dev/recond/reconcile/heal"
	"recond.dev/recond/reconcile/hook"
	"recond.dev/recond/reconcile/loop"
	"recond.dev/recond/reconcile/optout"
	"recond.dev/recond/reconcile/source"
	"recond.dev/recond/reconcile/suspend"
)

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

// Partial reports whether the tick's apply wrote some of what it meant to
// and not the rest: the namespace is between two revisions.
func (r *Result) Partial() bool {
	return r.Counts.Written() > 0 && (r.Counts.Refused > 0 || r.Counts.NotWritten > 0)
}

// Result is everything a tick did. Logs, metrics and spans read it.
type Result struct {
	// ID numbers the ticks of this process from 1 (reconcile.Reconciler.Request
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
	Hooks []hook.Plan `json:",omitempty"`
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
	Trigger loop.Trigger
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
	Heals      []heal.Heal
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
	Suspension *suspend.Suspension
	// ResumedBy names who ended a suspension through Resume since the
	// tick before ("" when nobody did: it ended by itself, or its
	// annotations were removed).
	ResumedBy string
	// Skipped are the objects the per-object opt-outs held back (reconcile/optout).
	Skipped []optout.Skip
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
	var rej *failure.RejectedError
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

// SecretKeyError is a desired Secret refused for what one of its keys
// holds. Its text names the Secret and the key, never the value, so it is
// shown wherever a tick's failure goes (the log, the Event, the page), where
// other errors about a Secret are not (Result.FailureText).
type SecretKeyError struct {
	Secret string // the Secret's name
	Field  string // data or stringData; "" is data
	Key    string // "" when the fault is the field itself
	Why    string
}

func (e *SecretKeyError) Error() string {
	if e.Key == "" {
		return "Secret/" + e.Secret + ": " + e.Why
	}
	field := e.Field
	if field == "" {
		field = "data"
	}
	return "Secret/" + e.Secret + ": " + field + "." + e.Key + " " + e.Why
}
