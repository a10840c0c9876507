package watch

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// benchObjects is the N=900 of the side-by-side figures, all ConfigMaps
// here: List cost depends on object count and size, not on kind.
const benchObjects = 900

func benchEnv(b *testing.B) *env {
	b.Helper()
	e := newEnv(b, Options{})
	var wg sync.WaitGroup
	work := make(chan int)
	for range 4 {
		wg.Go(func() {
			for i := range work {
				e.applyConfigMap("recond", fmt.Sprintf("cm-%04d", i), true,
					map[string]any{"key": "value", "other": fmt.Sprint(i)})
			}
		})
	}
	for i := range benchObjects {
		work <- i
	}
	close(work)
	wg.Wait()
	items, err := e.cache.List(ctxT(b, time.Minute), gvkConfigMap, selector)
	if err != nil {
		b.Fatal(err)
	}
	if len(items) != benchObjects {
		b.Fatalf("cached %d objects, want %d", len(items), benchObjects)
	}
	return e
}

// BenchmarkList is a converged observe of one kind: List from the cache.
func BenchmarkList(b *testing.B) {
	e := benchEnv(b)
	n := e.reqs.len()
	ctx := ctxT(b, time.Hour)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.cache.List(ctx, gvkConfigMap, selector); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(e.reqs.count(n, "GET", "")-e.reqs.count(n, "GET", "watch=true"))/float64(b.N), "requests/op")
}

// BenchmarkListAPI is the same List made by a LIST (--observe=list), for
// comparison.
func BenchmarkListAPI(b *testing.B) {
	e := benchEnv(b)
	ctx := ctxT(b, time.Hour)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.kube.List(ctx, gvkConfigMap, selector); err != nil {
			b.Fatal(err)
		}
	}
}
