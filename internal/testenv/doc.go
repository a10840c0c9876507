// Package testenv is recond's test bed: a real kube-apiserver and etcd
// (envtest, binaries built by the Makefile into KUBEBUILDER_ASSETS), real
// Git repositories made with go-git, served over file:// and smart HTTP,
// the CRDs the tests install (testdata/crds), and the tools run as
// processes: Jaeger, Prometheus, sops and cosign.
//
// Its parts below it, none of which imports it, are shaped after
// controller-runtime's pkg/internal/testing: apiproxy (the fault proxy in
// front of the API server), registry (a real OCI registry), tinyca (the
// one test CA), kubeconfig (the one kubeconfig writer) and tools (the one
// finder of every tool binary, and the tool-made fixtures).
package testenv
