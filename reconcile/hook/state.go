package hook

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"
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
