package bench

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
)

// requestCounter counts the API requests made through a rest.Config's
// transport, by verb: list, watch, get, apply, apply (dry run), patch,
// update, create, delete, discovery.
type requestCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

func newRequestCounter() *requestCounter { return &requestCounter{counts: map[string]int{}} }

// wrap is a rest.Config.Wrap function.
func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		c.count(req)
		return rt.RoundTrip(req)
	})
}

// count counts one request (also a apiproxy.Proxy.OnRequest function).
func (c *requestCounter) count(req *http.Request) {
	v := verbOf(req.Method, req.URL, req.Header.Get("Content-Type"))
	c.mu.Lock()
	c.counts[v]++
	c.mu.Unlock()
}

// snapshot returns a copy of the counts so far.
func (c *requestCounter) snapshot() requests {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := requests{}
	for k, v := range c.counts {
		out[k] = float64(v)
	}
	return out
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// requests is a count of requests by verb (a mean per pass when divided).
type requests map[string]float64

// since returns r minus an earlier snapshot, divided by passes.
func (r requests) since(earlier requests, passes int) requests {
	out := requests{}
	for k, v := range r {
		if d := (v - earlier[k]) / float64(passes); d != 0 {
			out[k] = d
		}
	}
	return out
}

// total is the number of requests of every verb.
func (r requests) total() float64 {
	var n float64
	for _, v := range r {
		n += v
	}
	return n
}

// String is "3 list" or "900 get, 900 apply (dry run)"; "none" when empty.
func (r requests) String() string {
	if len(r) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(r))
	for k := range r {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if r[keys[i]] != r[keys[j]] {
			return r[keys[i]] > r[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %s", trimFloat(r[k]), k)
	}
	return strings.Join(parts, ", ")
}

func trimFloat(f float64) string {
	if f == float64(int64(f)) {
		return fmt.Sprintf("%d", int64(f))
	}
	return fmt.Sprintf("%.1f", f)
}

// verbOf names the kind of an API request from its method, path, query and
// content type.
func verbOf(method string, u *url.URL, contentType string) string {
	segs := strings.Split(strings.Trim(u.Path, "/"), "/")
	// /api/v1/... or /apis/group/version/...; anything else (/api, /apis,
	// /openapi/v3, /version) is discovery.
	var rest []string
	switch {
	case len(segs) >= 2 && segs[0] == "api":
		rest = segs[2:]
	case len(segs) >= 3 && segs[0] == "apis":
		rest = segs[3:]
	}
	if len(rest) == 0 {
		return "discovery"
	}
	if len(rest) >= 2 && rest[0] == "namespaces" && len(rest) > 2 {
		rest = rest[2:] // namespaces/NS/resource[/name]
	}
	collection := len(rest) == 1
	dryRun := u.Query().Get("dryRun") != ""
	switch method {
	case http.MethodGet:
		if u.Query().Get("watch") == "true" || u.Query().Get("watch") == "1" {
			return "watch"
		}
		if collection {
			return "list"
		}
		return "get"
	case http.MethodPatch:
		v := "patch"
		if strings.HasPrefix(contentType, "application/apply-patch") {
			v = "apply"
		}
		if dryRun {
			v += " (dry run)"
		}
		return v
	case http.MethodPut:
		return "update"
	case http.MethodPost:
		return "create"
	case http.MethodDelete:
		if collection {
			return "delete collection"
		}
		return "delete"
	}
	return strings.ToLower(method)
}
