// Package testenv is recond's test bed: a real kube-apiserver and etcd
// (envtest, binaries built by the Makefile into KUBEBUILDER_ASSETS) and real
// Git repositories made with go-git, served over file:// and smart HTTP.
package testenv
