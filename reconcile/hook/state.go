package hook

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"
)

// The phases of a revision's hook run, in order (State.Phase).
const (
	// PhasePre: the pre-hooks run; nothing of the revision is written yet.
	PhasePre = "pre"
	// PhaseMain: the pre-hooks are done; the revision is written.
	PhaseMain = "main"
	// PhasePost: the revision was applied in full and found healthy; the
	// post-hooks run.
	PhasePost = "post"
	// PhaseDone: every hook of the revision succeeded.
	PhaseDone = "done"
	// PhaseFailed: a hook failed (in FailedIn); hooks run once per
	// revision, so the revision is held until a new one.
	PhaseFailed = "failed"
)

// State is what the inventory records of the hooks of the last revision
// that had any: so that they run once per revision, and a restart neither
// runs them again nor forgets one that is running.
type State struct {
	Revision string `json:"revision"`
	// Event is install (the instance had applied nothing yet) or upgrade.
	Event string `json:"event"`
	// Phase is pre, main (the pre-hooks are done), post (the revision
	// was applied and found healthy), done or failed.
	Phase string `json:"phase"`
	// Started are the hooks of the phase started, with when; Done those
	// that succeeded.
	Started map[string]time.Time `json:"started,omitempty"`
	Done    []string             `json:"done,omitempty"`
	// Failed is the failure, once a hook failed, and FailedIn the phase
	// it failed in (pre or post).
	Failed   string `json:"failed,omitempty"`
	FailedIn string `json:"failedIn,omitempty"`
}

// Begin is the state of a revision's hook run as it starts: its pre-hooks
// first, for install when the instance had applied nothing yet (lastApplied
// ""), else for upgrade.
func Begin(revision, lastApplied string) *State {
	event := "upgrade"
	if lastApplied == "" {
		event = "install"
	}
	return &State{Revision: revision, Event: event, Phase: PhasePre, Started: map[string]time.Time{}}
}

// Enter moves s to phase, with none of its hooks started yet.
func (s *State) Enter(phase string) {
	s.Phase, s.Started, s.Done = phase, map[string]time.Time{}, nil
	if phase == PhaseDone {
		s.Started = nil
	}
}

// Fail records the failure err of a hook in phase.
func (s *State) Fail(err error, phase string) {
	s.Phase, s.Failed, s.FailedIn = PhaseFailed, err.Error(), phase
}

// Pending are the hooks of list that s has neither started nor seen
// succeed.
func (s *State) Pending(list []*Hook) []*Hook {
	var out []*Hook
	for _, h := range list {
		if _, ok := s.Started[h.Key()]; !ok && !slices.Contains(s.Done, h.Key()) {
			out = append(out, h)
		}
	}
	return out
}

// Clone is a deep copy of s (nil: nil).
func (s *State) Clone() *State {
	if s == nil {
		return nil
	}
	c := *s
	c.Started = make(map[string]time.Time, len(s.Started))
	maps.Copy(c.Started, s.Started)
	c.Done = slices.Clone(s.Done)
	return &c
}

// Encode is s as the inventory records it ("" for nil).
func (s *State) Encode() string {
	if s == nil {
		return ""
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// ParseState reads what Encode wrote ("": nil).
func ParseState(v string) (*State, error) {
	if v == "" {
		return nil, nil
	}
	s := &State{}
	if err := json.Unmarshal([]byte(v), s); err != nil {
		return nil, fmt.Errorf("hooks: %w", err)
	}
	return s, nil
}
