package status

import "time"

// SchemaVersion names the JSON schema of Status and TickState. Fields are
// only ever added under one version; a rename or removal gets a new one.
const SchemaVersion = "recond.dev/status/v1"

// Status is the JSON of GET /api/v1/status: the same facts as the HTML page
// (header, timeline of the last ticks, one page of the managed objects).
// Times are RFC 3339 in UTC; durations are seconds.
type Status struct {
	Schema    string    `json:"schema"`    // SchemaVersion
	Generated time.Time `json:"generated"` // when the server built this answer

	Namespace string `json:"namespace"`
	Instance  string `json:"instance"`
	// Repo is the repository's display URL (never with credentials).
	Repo    string `json:"repo"`
	Ref     string `json:"ref"`
	Path    string `json:"path"`
	Observe string `json:"observe"`
	// IntervalSeconds is --interval.
	IntervalSeconds float64 `json:"interval_seconds"`
	// Chart is the Helm chart the last revision read rendered, when --path
	// holds one.
	Chart *Chart `json:"chart,omitempty"`
	// Suspension is the operator's suspension the last tick found in
	// force: the loop writes, prunes and heals nothing until it ends.
	Suspension *Suspension `json:"suspension,omitempty"`

	// Revision is the commit the last tick that resolved one read;
	// AppliedRevision the one the last tick that ran every phase without
	// failing found in place or wrote. "" before either.
	Revision        string `json:"revision"`
	RevisionURL     string `json:"revision_url,omitempty"`
	AppliedRevision string `json:"applied_revision"`
	// Health is the instance's health at the last assessment (healthy,
	// progressing, degraded, unknown); "" before the first.
	Health string `json:"health"`

	// LastTick is when the last tick ended, LastSuccess when the last tick
	// that did not fail ended (also one older than the ring), NextTick about
	// when the next interval tick is due (LastTick + interval). Absent before
	// the first.
	LastTick    *time.Time `json:"last_tick,omitempty"`
	LastSuccess *time.Time `json:"last_success,omitempty"`
	NextTick    *time.Time `json:"next_tick,omitempty"`

	// Progress is where the loop is.
	Progress Progress `json:"progress"`
	// Ticks are the last ticks, newest first.
	Ticks []Tick `json:"ticks"`
	// Objects is one page (?page=N) of the objects of the last health
	// assessment.
	Objects Objects `json:"objects"`
}

// Suspension is an operator's suspension: who, why, and until when (the
// loop then resumes by itself).
type Suspension struct {
	Until            time.Time `json:"until"`
	RemainingSeconds float64   `json:"remaining_seconds"`
	Reason           string    `json:"reason"`
	By               string    `json:"by"`
}

// Chart names a Helm chart: its name and version (Chart.yaml) and the
// values files given with --helm-values.
type Chart struct {
	Name    string   `json:"name"`
	Version string   `json:"version"`
	Values  []string `json:"values,omitempty"`
}

// Progress is where the loop is: the id of the last tick started, of the
// last one ended, and whether one is running.
type Progress struct {
	Started  uint64 `json:"started"`
	Finished uint64 `json:"finished"`
	Running  bool   `json:"running"`
}

// Tick is the summary of one tick.
type Tick struct {
	ID              uint64    `json:"id"`
	Start           time.Time `json:"start"`
	End             time.Time `json:"end"`
	DurationSeconds float64   `json:"duration_seconds"`
	// Trigger is interval, watch, manual or webhook; Outcome converged,
	// applied, out_of_sync or failed.
	Trigger  string `json:"trigger"`
	Outcome  string `json:"outcome"`
	Revision string `json:"revision"`
	DryRun   bool   `json:"dry_run"`
	// Health is the instance's health the tick assessed; "" when the
	// health phase did not run.
	Health string     `json:"health,omitempty"`
	Phases []PhaseRun `json:"phases"`
	Counts Counts     `json:"counts"`
	// Heals is how many drifts a watch showed that the tick's writes
	// restored.
	Heals int `json:"heals"`
	// Failure is the failed phase; absent when the tick did not fail.
	Failure *Failure `json:"failure,omitempty"`
	// TraceID is the tick's trace (absent when it was not sampled);
	// TraceURL links to it when a trace URL template is set.
	TraceID  string `json:"trace_id,omitempty"`
	TraceURL string `json:"trace_url,omitempty"`
}

// PhaseRun is one phase that ran.
type PhaseRun struct {
	Phase           string  `json:"phase"`
	DurationSeconds float64 `json:"duration_seconds"`
	Failed          bool    `json:"failed"`
	Reason          string  `json:"reason,omitempty"`
	// Aside is set for a phase whose failure is not the tick's (health).
	Aside bool `json:"aside,omitempty"`
}

// Counts are a tick's object counts.
type Counts struct {
	Desired     int `json:"desired"`
	Drifted     int `json:"drifted"`
	Created     int `json:"created"`
	Updated     int `json:"updated"`
	Pruned      int `json:"pruned"`
	Managed     int `json:"managed"`
	Terminating int `json:"terminating"`
	Equivalent  int `json:"equivalent"`
	// Refused are the writes that failed after validation (a quota,
	// admission that rejects only real writes); NotWritten the changes an
	// apply that stopped never attempted. Either set: a partial apply.
	Refused    int `json:"refused,omitempty"`
	NotWritten int `json:"not_written,omitempty"`
}

// Failure is why a tick failed. Message is the Secret-safe text
// (reconcile.Result.FailureText), in full.
type Failure struct {
	Phase   string `json:"phase"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// Objects is one page of the managed objects.
type Objects struct {
	Page    int      `json:"page"`     // from 1
	PerPage int      `json:"per_page"` // objects per page
	Pages   int      `json:"pages"`    // at least 1
	Total   int      `json:"total"`
	Items   []Object `json:"items"`
}

// Object is one object recond manages, as the last health assessment saw
// it.
type Object struct {
	APIVersion string `json:"api_version"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	// Revision is the object's recond.dev/revision annotation.
	Revision string `json:"revision,omitempty"`
	// Health is current, in_progress, failed, terminating or unknown;
	// Message says why for any but current.
	Health  string `json:"health"`
	Message string `json:"message,omitempty"`
	// Since is when this process first saw the object in its health;
	// Changed when recond's apply last changed it (absent when unknown).
	Since   *time.Time `json:"since,omitempty"`
	Changed *time.Time `json:"changed,omitempty"`
}

// TickState is the JSON of GET /api/v1/ticks/{id}. State is pending (the
// tick has not started), running, done (Tick is set) or expired (it ended
// but is no longer among the ticks kept).
type TickState struct {
	Schema string      `json:"schema"` // SchemaVersion
	ID     uint64      `json:"id"`
	State  string      `json:"state"`
	Tick   *TickDetail `json:"tick,omitempty"`
}

// The states of a TickState.
const (
	StatePending = "pending"
	StateRunning = "running"
	StateDone    = "done"
	StateExpired = "expired"
)

// TickDetail is a tick with what it found and did.
type TickDetail struct {
	Tick
	// Changes are the differences the diff phase found, at most
	// MaxChanges; MoreChanges counts those left out.
	Changes     []Change `json:"changes"`
	MoreChanges int      `json:"more_changes,omitempty"`
	// Operations are the apply phase's writes (at most MaxChanges, then
	// MoreOperations); Rejected the writes the validating dry run refused.
	Operations     []Operation `json:"operations"`
	MoreOperations int         `json:"more_operations,omitempty"`
	Rejected       []Operation `json:"rejected,omitempty"`
	// Terminating, Equivalent and BackingOff name ("Kind/name") the objects
	// being deleted, those the server showed unchanged although the local
	// diff differed, and those whose self-heal was held back.
	Terminating []string `json:"terminating,omitempty"`
	Equivalent  []string `json:"equivalent,omitempty"`
	BackingOff  []string `json:"backing_off,omitempty"`
	// Skipped are the objects a per-object opt-out held back: "Kind/name
	// (reason)" or "Kind/name (ignore_fields: /pointer,...)"; Orphaned
	// those that left Git with recond.dev/prune: disabled.
	Skipped  []string `json:"skipped,omitempty"`
	Orphaned []string `json:"orphaned,omitempty"`
}

// Change is one object the diff phase found different.
type Change struct {
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Action string `json:"action"` // create, update or delete
	// Uncertain: only the server could tell (confirmed by a dry run).
	Uncertain bool    `json:"uncertain,omitempty"`
	Fields    []Field `json:"fields,omitempty"`
	// MoreFields counts the fields left out (at most MaxFields per tick).
	MoreFields int `json:"more_fields,omitempty"`
}

// Field is one changed field: Live and Desired are the values as JSON text
// (cut at MaxValue bytes, ending in "…"), absent when the field is. A
// Secret's data values are the diff's masks ("<secret sha256:…>").
type Field struct {
	Path    string `json:"path"`
	Live    string `json:"live,omitempty"`
	Desired string `json:"desired,omitempty"`
}

// Operation is one write of the apply phase (or one the dry run refused).
type Operation struct {
	Kind            string   `json:"kind"`
	Name            string   `json:"name"`
	Action          string   `json:"action"`
	DurationSeconds float64  `json:"duration_seconds"`
	Fields          []string `json:"fields,omitempty"`
	// Error is the Secret-safe error (reconcile.Operation.ErrorText).
	Error string `json:"error,omitempty"`
}
