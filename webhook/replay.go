package webhook

import (
	"sync"
	"time"
)

// replayCache remembers the keys of authenticated deliveries for a window,
// in at most max keys: when full, the oldest key is forgotten first. Keys are
// kept in arrival order, so expiry pops from the front.
type replayCache struct {
	mu     sync.Mutex
	window time.Duration
	max    int
	at     map[string]time.Time
	order  []stamped // arrival order; order[head:] is live
	head   int
}

type stamped struct {
	key string
	at  time.Time
}

func newReplayCache(window time.Duration, max int) *replayCache {
	return &replayCache{window: window, max: max, at: make(map[string]time.Time)}
}

// seen reports whether any of keys was recorded less than the window ago. If
// none was, it records them all, so that of two identical deliveries racing
// each other exactly one is acted on.
func (c *replayCache) seen(now time.Time, keys ...string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expire(now)
	for _, k := range keys {
		if t, ok := c.at[k]; ok && now.Sub(t) < c.window {
			return true
		}
	}
	for _, k := range keys {
		for len(c.at) >= c.max && c.head < len(c.order) {
			c.pop()
		}
		c.at[k] = now
		c.order = append(c.order, stamped{key: k, at: now})
	}
	return false
}

// len is the number of keys remembered.
func (c *replayCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.at)
}

func (c *replayCache) expire(now time.Time) {
	for c.head < len(c.order) && now.Sub(c.order[c.head].at) >= c.window {
		c.pop()
	}
}

func (c *replayCache) pop() {
	s := c.order[c.head]
	c.order[c.head] = stamped{}
	c.head++
	// A key recorded again later has a newer time; only forget the entry
	// this stamp made.
	if t, ok := c.at[s.key]; ok && t.Equal(s.at) {
		delete(c.at, s.key)
	}
	if c.head > len(c.order)/2 {
		c.order = append(c.order[:0], c.order[c.head:]...)
		c.head = 0
	}
}
