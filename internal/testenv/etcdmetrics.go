package testenv

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// EtcdURL is the client URL of the control plane's etcd (plain HTTP on
// loopback), which also serves etcd's /metrics.
func (cp *ControlPlane) EtcdURL() *url.URL {
	u := *cp.env.ControlPlane.Etcd.URL
	return &u
}

// EtcdCounters reads etcd's /metrics and returns the value of each named
// counter (a metric without labels, such as etcd_mvcc_put_total); a name
// etcd does not expose is missing from the map.
func (cp *ControlPlane) EtcdCounters(ctx context.Context, names ...string) (map[string]float64, error) {
	u := cp.EtcdURL().JoinPath("metrics")
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("etcd /metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("etcd /metrics: %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return nil, fmt.Errorf("etcd /metrics: %w", err)
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || !want[name] {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil {
			out[name] = v
		}
	}
	return out, sc.Err()
}
