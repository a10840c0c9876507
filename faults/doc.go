// Package faults is recond's fault matrix: the recond binary, run as a
// process against the real parts (kube-apiserver and etcd, Git over file://
// and HTTP, a fault-injecting proxy in front of either), with one fault
// injected per test. Each test checks that recond does not crash, that the
// tick fails in the phase and with the reason the fault calls for (tick
// line, metric), that nothing is pruned, half-applied or lost because of
// it, and that the loop recovers by itself once the fault is gone, within
// a bound stated in ticks; it logs the measured recovery time
// ("recovered in"). docs/reliability.md lists every row.
//
// The package holds only tests; its process harness is in recond_test.go.
package faults
