package hook

import (
	"fmt"
	"strings"
	"time"
)

// The default bounds of a revision's hooks (--helm-hook-max,
// --helm-hook-max-bytes): every hook's state is kept in the inventory
// ConfigMap while its revision's hooks run, so a chart that makes
// thousands of hooks (a `range until` in a template) would make the
// inventory, and etcd, grow with each one.
const (
	DefaultMax      = 100
	DefaultMaxBytes = 64 << 10
)

// CheckBudget refuses a revision whose hooks pass the bounds (0: the
// defaults): their number, or the size of their state in the inventory
// once every one has started and succeeded.
func CheckBudget(hooks []*Hook, max, maxBytes int) error {
	if max <= 0 {
		max = DefaultMax
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	if len(hooks) > max {
		return fmt.Errorf("the revision has %d hooks, more than --helm-hook-max (%d)", len(hooks), max)
	}
	full := &State{Revision: strings.Repeat("0", 64), Event: "upgrade", Phase: PhasePost, Started: map[string]time.Time{}}
	at := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, h := range hooks {
		full.Started[h.Key()] = at
		full.Done = append(full.Done, h.Key())
	}
	if n := len(full.Encode()); n > maxBytes {
		return fmt.Errorf("the revision's %d hooks need %d bytes of state in the inventory, more than --helm-hook-max-bytes (%d)", len(hooks), n, maxBytes)
	}
	return nil
}
