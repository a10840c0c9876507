// Package tools finds the tool binaries the tests run, one way for all of
// them (Find, Lookup and the Tool of each: kube-apiserver and etcd, Jaeger,
// promtool, Prometheus, the OCI registry, helm, sops, age-keygen, cosign,
// Chromium, git), starts one as a process of the test, and keeps what a
// fixture a tool made needs: whether this run makes it again
// (UpdateFixtures), which version made it and which one tools/ pins.
//
// It is shaped after controller-runtime's pkg/internal/testing/process
// (bin_path_finder.go): a binary is named by its own variable, else found
// in a directory a variable names, else on PATH.
package tools
