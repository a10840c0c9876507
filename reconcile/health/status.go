package health

// Status is the health of one object. The values are a contract: the
// recond_resources_health{health} label and the status page use them.
type Status string

// Every health an object can have.
const (
	// Current: the object is what its spec asks for (a Deployment's
	// replicas updated and available, a Job complete, a custom resource
	// whose controller says it is ready).
	Current Status = "current"
	// InProgress: its controller is still acting on it.
	InProgress Status = "in_progress"
	// Failed: it will not get there by itself (ProgressDeadlineExceeded, a
	// failed Job, a Stalled condition, a rule's failed expression, or
	// in_progress past --health-timeout).
	Failed Status = "failed"
	// Terminating: it is being deleted (deletionTimestamp set).
	Terminating Status = "terminating"
	// Unknown: nothing recond can read says how it is (a custom resource
	// with no status yet, or a status in no shape recond knows). Unknown is
	// not healthy.
	Unknown Status = "unknown"
	// Missing: the desired set names it and it does not exist (a write the
	// server refused, a tick stopped before writing it, a dry run, or
	// deleted by hand and not yet re-created). Missing is not healthy.
	Missing Status = "missing"
)

// Statuses lists every Status, so that labelled series can be
// pre-initialised.
var Statuses = []Status{Current, InProgress, Failed, Terminating, Unknown, Missing}

// Instance is the health of an instance: the worst of its objects'. The
// values are a contract: the recond_health_status{status} label uses them.
type Instance string

// Every health an instance can have.
const (
	// Healthy: every object is current (or there is none).
	Healthy Instance = "healthy"
	// Progressing: no object failed or unknown, some in progress or
	// terminating.
	Progressing Instance = "progressing"
	// Degraded: at least one object failed or is missing.
	Degraded Instance = "degraded"
	// InstanceUnknown: no object failed, at least one is unknown.
	InstanceUnknown Instance = "unknown"
)

// Instances lists every Instance.
var Instances = []Instance{Healthy, Progressing, Degraded, InstanceUnknown}

// Of is the health of an instance whose objects have statuses: degraded if
// any failed or is missing, else unknown if any is unknown, else progressing if any is in
// progress or terminating, else healthy.
func Of(statuses []Status) Instance {
	var failed, unknown, progressing bool
	for _, s := range statuses {
		switch s {
		case Failed, Missing:
			failed = true
		case Unknown:
			unknown = true
		case InProgress, Terminating:
			progressing = true
		}
	}
	switch {
	case failed:
		return Degraded
	case unknown:
		return InstanceUnknown
	case progressing:
		return Progressing
	}
	return Healthy
}

// Assessment is the health of one object and why.
type Assessment struct {
	Status Status
	// Message says why, for any status but Current (kstatus's message, a
	// condition's reason and message, or the rule that decided).
	Message string
}
