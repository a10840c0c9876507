// Package apiproxy is the fault proxy of the test bed: a TLS reverse proxy
// in front of a kube-apiserver that injects faults (delays, error answers,
// held requests, refused connections, cut, stalled, dropped and expired
// watches) and counts what it forwards. Its test runs in the testenv
// package, against the control plane there.
package apiproxy
