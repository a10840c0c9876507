// Package kubeconfig writes the kubeconfig files of the test bed, one way
// for every server a test points recond at: the control plane as its
// admin or as another user (impersonated), the fault proxy in front of it,
// any other front a test serves. Shaped after controller-runtime's
// KubeConfigFromREST (pkg/internal/testing/controlplane/kubectl.go).
package kubeconfig
