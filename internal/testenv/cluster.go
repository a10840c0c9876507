package testenv

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"recond.dev/recond/internal/testenv/kubeconfig"
	"recond.dev/recond/internal/testenv/tools"
)

// ControlPlane is a running kube-apiserver and etcd.
type ControlPlane struct {
	env *envtest.Environment
	// Config connects as a cluster admin.
	Config *rest.Config
	// KubeConfig is Config as a kubeconfig file's bytes.
	KubeConfig []byte
	// Client is a typed clientset for Config.
	Client kubernetes.Interface
}

// StartControlPlane starts kube-apiserver and etcd from KUBEBUILDER_ASSETS.
// The caller must Stop it (in TestMain, or t.Cleanup).
func StartControlPlane() (*ControlPlane, error) {
	if err := findControlPlane(); err != nil {
		return nil, err
	}
	env := &envtest.Environment{ControlPlaneStartTimeout: 2 * time.Minute, ControlPlaneStopTimeout: 30 * time.Second}
	api := env.ControlPlane.GetAPIServer()
	// A host without a default route has no address to advertise; loopback
	// and no endpoint reconciler work everywhere.
	api.Configure().Set("advertise-address", "127.0.0.1").Set("endpoint-reconciler-type", "none")
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("start control plane: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	return &ControlPlane{env: env, Config: cfg, KubeConfig: env.KubeConfig, Client: cs}, nil
}

// Stop stops the control plane and removes its data.
func (cp *ControlPlane) Stop() error { return cp.env.Stop() }

var nsCounter atomic.Int64

// Namespace creates a fresh namespace for one test.
func (cp *ControlPlane) Namespace(t testing.TB) string {
	t.Helper()
	cp.Require(t)
	name := fmt.Sprintf("%s-%d", sanitize(t.Name()), nsCounter.Add(1))
	_, err := cp.Client.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	return name
}

// WriteKubeConfig writes the admin kubeconfig into a temporary directory
// of the test and returns its path.
func (cp *ControlPlane) WriteKubeConfig(t testing.TB) string {
	t.Helper()
	return kubeconfig.Write(t, cp.Config)
}

// WriteKubeConfigAs writes the admin kubeconfig impersonating user (such
// as system:serviceaccount:NS:NAME), so that RBAC applies to user, and
// returns its path.
func (cp *ControlPlane) WriteKubeConfigAs(t testing.TB, user string) string {
	t.Helper()
	cfg := rest.CopyConfig(cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	return kubeconfig.Write(t, cfg)
}

// findControlPlane says why kube-apiserver or etcd cannot be started, if
// either is missing.
func findControlPlane() error {
	for _, tool := range []tools.Tool{tools.KubeAPIServer, tools.Etcd} {
		if _, err := tools.Lookup(tool); err != nil {
			return err
		}
	}
	return nil
}

func sanitize(s string) string {
	s = strings.ToLower(s)
	var b strings.Builder
	for _, r := range s {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	out := strings.Trim(b.String(), "-")
	if len(out) > 40 {
		out = strings.Trim(out[:40], "-")
	}
	return out
}

// RunTests is the body of a package's TestMain: unless -short, it starts a
// control plane into *cp for the package's tests to share (each in its own
// namespace), runs them and stops it, whatever they did. It returns the exit
// code.
func RunTests(m *testing.M, cp **ControlPlane) int {
	flag.Parse()
	if testing.Short() {
		return m.Run()
	}
	c, err := StartControlPlane()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	*cp = c
	defer func() {
		if err := c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop control plane:", err)
		}
	}()
	return m.Run()
}

// Require skips the test when there is no control plane (cp is nil: the
// tests run with -short).
func (cp *ControlPlane) Require(t testing.TB) {
	t.Helper()
	if cp == nil {
		t.Skip("needs kube-apiserver and etcd; skipped with -short")
	}
}

// StartRestartableControlPlane starts a control plane of the test's own,
// stopped when the test ends, whose kube-apiserver can be stopped and
// started again (StopAPIServer, StartAPIServer) while etcd keeps running
// with its data. The API server keeps its port, serving certificate and
// client CA across restarts, so Config, KubeConfig and Client stay valid.
func StartRestartableControlPlane(t testing.TB) *ControlPlane {
	t.Helper()
	if err := findControlPlane(); err != nil {
		t.Fatal(err)
	}
	// The stop timeout is the SIGKILL of StopAPIServer.
	env := &envtest.Environment{ControlPlaneStartTimeout: 2 * time.Minute, ControlPlaneStopTimeout: 5 * time.Second}
	api := env.ControlPlane.GetAPIServer()
	api.Configure().Set("advertise-address", "127.0.0.1").Set("endpoint-reconciler-type", "none")
	// A directory of the test's own is kept by a stop (a random one is
	// dropped, and with it the certificates every client trusts).
	api.CertDir = t.TempDir()
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		t.Fatalf("start control plane: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Logf("stop control plane: %v", err)
		}
	})
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &ControlPlane{env: env, Config: cfg, KubeConfig: env.KubeConfig, Client: cs}
}

// StopAPIServer stops kube-apiserver only (SIGTERM, then SIGKILL after
// 5 s: open watches can keep its graceful shutdown from ending) and waits
// until its port is closed; etcd keeps running with its data. For a control
// plane of StartRestartableControlPlane.
func (cp *ControlPlane) StopAPIServer() error {
	api := cp.env.ControlPlane.APIServer
	if err := api.Stop(); err != nil && !strings.Contains(err.Error(), "timeout waiting for process") {
		return fmt.Errorf("stop kube-apiserver: %w", err)
	}
	addr := net.JoinHostPort(api.SecureServing.Address, api.SecureServing.Port)
	for deadline := time.Now().Add(30 * time.Second); ; {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return nil
		}
		c.Close()
		if time.Now().After(deadline) {
			return fmt.Errorf("kube-apiserver still listens on %s", addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// StartAPIServer starts kube-apiserver again on the same port and
// certificates, over the same etcd, and waits until it is healthy.
func (cp *ControlPlane) StartAPIServer() error {
	if err := cp.env.ControlPlane.APIServer.Start(); err != nil {
		return fmt.Errorf("start kube-apiserver again: %w", err)
	}
	return nil
}
