package status

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"recond.dev/recond/reconcile"
)

// benchPage is a page with 100 ticks (every tenth failed, every tenth with
// changes, all sampled) and 1,000 managed objects.
func benchPage() *Page {
	p := New(testInfo, Options{Now: func() time.Time { return t0.Add(3 * time.Hour) }})
	for id := uint64(1); id <= 100; id++ {
		var r *reconcile.Result
		switch id % 10 {
		case 3:
			r = failedRead(id)
		case 7:
			r = secretTick(id)
		default:
			r = converged(id)
		}
		if id == 100 {
			r = withObjects(r, 1000)
		}
		p.TickEnd(sampled(byte(id)), r)
	}
	return p
}

// BenchmarkStatusPage renders / with 100 ticks and 1,000 objects (one page
// of 100) and reports the page's size and the p99 of a render.
func BenchmarkStatusPage(b *testing.B) {
	h := benchPage().Handler()
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	times := make([]time.Duration, 0, b.N)
	var size int
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		start := time.Now()
		h.ServeHTTP(rec, req)
		times = append(times, time.Since(start))
		if rec.Code != http.StatusOK {
			b.Fatalf("GET / = %d", rec.Code)
		}
		size = rec.Body.Len()
	}
	slices.Sort(times)
	b.ReportMetric(float64(size), "page-bytes")
	b.ReportMetric(float64(times[len(times)*99/100].Microseconds())/1000, "p99-ms")
	if size >= 100<<10 {
		b.Errorf("page is %d bytes, want < 100 KB", size)
	}
}

// BenchmarkStatusPageParallel serves / over HTTP from parallel clients while
// ticks keep ending, and reports requests per second.
func BenchmarkStatusPageParallel(b *testing.B) {
	p := benchPage()
	srv := httptest.NewServer(p.Handler())
	defer srv.Close()
	client := srv.Client()
	client.Transport.(*http.Transport).MaxIdleConnsPerHost = 64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var id atomic.Uint64
	id.Store(100)
	go func() { // a tick every 10 ms: the page must not slow them
		for ctx.Err() == nil {
			p.TickEnd(sampled(1), converged(id.Add(1)))
			time.Sleep(10 * time.Millisecond)
		}
	}()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := client.Get(srv.URL + "/")
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Errorf("GET / = %d", resp.StatusCode)
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
}

// BenchmarkTickEnd is what recording a tick costs the loop: a tick with 500
// changes and 1,000 objects.
func BenchmarkTickEnd(b *testing.B) {
	p := New(testInfo, Options{})
	r := withObjects(secretTick(1), 1000)
	for range MaxChanges / 2 {
		r.Changes = append(r.Changes, r.Changes[:2]...)
	}
	b.ReportAllocs()
	for b.Loop() {
		p.TickEnd(context.Background(), r)
	}
}
