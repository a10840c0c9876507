package webhook

import (
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// limiter holds one token bucket per client, for at most max clients.
type limiter struct {
	mu    sync.Mutex
	limit rate.Limit
	burst int
	max   int
	m     map[string]*rate.Limiter
}

func newLimiter(limit rate.Limit, burst, max int) *limiter {
	return &limiter{limit: limit, burst: burst, max: max, m: make(map[string]*rate.Limiter)}
}

// allow takes one token from client's bucket at now, and reports whether
// there was one.
func (l *limiter) allow(client string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.m[client]
	if !ok {
		if len(l.m) >= l.max {
			l.evict(now)
		}
		b = rate.NewLimiter(l.limit, l.burst)
		l.m[client] = b
	}
	return b.AllowN(now, 1)
}

// evict makes room for a new client. A full bucket says nothing a new
// bucket would not, so those go first; if every client is still
// throttled, an eighth of them is forgotten (a client that spreads itself
// over many addresses gains at most a fresh burst per address).
func (l *limiter) evict(now time.Time) {
	for k, b := range l.m {
		if b.TokensAt(now) >= float64(l.burst) {
			delete(l.m, k)
		}
	}
	for k := range l.m {
		if len(l.m) < l.max-l.max/8 {
			break
		}
		delete(l.m, k)
	}
}

// remoteHost is the default client key: the host part of the peer address.
// Headers such as X-Forwarded-For are not read: any client can set them.
func remoteHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
