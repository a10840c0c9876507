//go:build pprof

// A build for profiling, never shipped: `go build -tags pprof ./cmd/recond`
// serves net/http/pprof on $RECOND_PPROF_ADDR (e.g. 127.0.0.1:6060). The
// shipped binary does not link net/http/pprof: linking it turns the
// runtime's memory profiling on in every process, some 1.5 MiB of profiling
// buckets (docs/performance.md).

package main

import (
	"net/http"
	_ "net/http/pprof"
	"os"
)

func init() {
	addr := os.Getenv("RECOND_PPROF_ADDR")
	if addr == "" {
		return
	}
	go func() { _ = http.ListenAndServe(addr, nil) }()
}
