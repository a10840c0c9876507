// Package bench measures recond against Flux's apply engine
// (github.com/fluxcd/pkg/ssa ResourceManager.ApplyAllStaged, what
// kustomize-controller runs at each reconcile) on one real kube-apiserver:
// first sync, converged tick, one-object drift, API requests by verb, heal
// latency and memory, for 90 to 3,000 objects, with recond as a library
// (both observe modes) and as the binary users run (`recond run`, its tick
// lines read, its requests counted by a proxy). TestFleet holds 100
// namespaces on one API server with one recond process each, then with
// Flux's engine in one process; TestHealBinary measures heal latency on
// the binary.
//
// The package holds only tests, so nothing it imports (Flux's engine, the
// plotting library) reaches the recond binary. The comparison runs only when
// RECOND_BENCH=1 (`make bench`); it then writes its tables into
// docs/performance.md and its plot into docs/img/bench-converged.png when
// RECOND_BENCH_DOCS names the docs directory:
//
//	make bench
//	RECOND_BENCH=1 RECOND_BENCH_N=90,300 go test -count=1 -timeout 30m -run TestCompare -v ./bench/
package bench
