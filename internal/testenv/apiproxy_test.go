package testenv

import (
	"context"
	"errors"
	"net/http"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"recond.dev/recond/internal/testenv/apiproxy"
)

// TestAPIProxy checks every fault of the proxy (package apiproxy) against a
// real API server.
func TestAPIProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("needs kube-apiserver and etcd; skipped with -short")
	}
	cp, err := StartControlPlane()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	ns := cp.Namespace(t)
	p := apiproxy.Start(t, cp.Config)
	cs := proxyClient(t, p.KubeConfig(t))
	ctx := context.Background()
	cms := cs.CoreV1().ConfigMaps(ns)
	cm := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}

	t.Run("forwards as the admin", func(t *testing.T) {
		if _, err := cms.Create(ctx, cm("a"), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create through the proxy: %v", err)
		}
	})

	t.Run("token forwarded without the admin's certificate", func(t *testing.T) {
		_, err := proxyClient(t, p.KubeConfigWithToken(t, "not-a-token")).CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		if !apierrors.IsUnauthorized(err) {
			t.Fatalf("list with a bad token = %v, want 401 Unauthorized", err)
		}
	})

	t.Run("status answers", func(t *testing.T) {
		for _, tc := range []struct {
			code  int
			check func(error) bool
		}{
			{http.StatusTooManyRequests, apierrors.IsTooManyRequests},
			{http.StatusInternalServerError, apierrors.IsInternalError},
			{http.StatusServiceUnavailable, apierrors.IsServiceUnavailable},
		} {
			// client-go retries an answer with Retry-After itself (10
			// times): Times 20 outlasts it.
			retry := 0
			if tc.code == http.StatusTooManyRequests {
				retry = 1
			}
			f := p.Add(apiproxy.Fault{Match: apiproxy.Match{Method: "GET", Path: "/configmaps/a"}, Status: tc.code, RetryAfter: retry, Times: 20})
			_, err := cms.Get(ctx, "a", metav1.GetOptions{})
			f.Remove()
			if !tc.check(err) {
				t.Errorf("get with fault %d = %v", tc.code, err)
			}
			if f.Hits() < 1 {
				t.Errorf("fault %d: %d hits", tc.code, f.Hits())
			}
		}
		if _, err := cms.Get(ctx, "a", metav1.GetOptions{}); err != nil {
			t.Errorf("get after the faults were removed: %v", err)
		}
	})

	t.Run("delay", func(t *testing.T) {
		f := p.Add(apiproxy.Fault{Match: apiproxy.Match{Path: "/configmaps"}, Delay: 300 * time.Millisecond})
		start := time.Now()
		_, err := cms.Get(ctx, "a", metav1.GetOptions{})
		f.Remove()
		if err != nil || time.Since(start) < 300*time.Millisecond {
			t.Errorf("delayed get took %s (err %v), want at least 300ms", time.Since(start), err)
		}
	})

	t.Run("hold", func(t *testing.T) {
		release := make(chan struct{})
		f := p.Add(apiproxy.Fault{Match: apiproxy.Match{Method: "POST", Path: "/configmaps"}, Hold: release})
		done := make(chan error, 1)
		go func() { _, err := cms.Create(ctx, cm("held"), metav1.CreateOptions{}); done <- err }()
		f.WaitHits(t, 1, time.Minute)
		time.Sleep(200 * time.Millisecond) // a create let through would land by now (a check a busy machine can only pass)
		if _, err := cp.Client.CoreV1().ConfigMaps(ns).Get(ctx, "held", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("held create reached the server: %v", err)
		}
		close(release)
		if err := <-done; err != nil {
			t.Errorf("released create: %v", err)
		}
		f.Remove()
	})

	t.Run("down", func(t *testing.T) {
		p.SetDown(true)
		_, err := cms.Get(ctx, "a", metav1.GetOptions{})
		p.SetDown(false)
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("get while down = %v, want connection refused", err)
		}
		if _, err := cms.Get(ctx, "a", metav1.GetOptions{}); err != nil {
			t.Errorf("get when up again: %v", err)
		}
	})

	// openWatch waits until the proxy holds no watch (those of earlier
	// subtests are gone), then watches from a list's resourceVersion and
	// waits until the proxy holds it: the one open watch, with no initial
	// events, so every event read is one the test caused (no quiet period
	// to wait out, which a busy machine could stretch).
	waitOpen := func(t *testing.T, n int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second) // a guard against a hang
		for p.OpenWatches() != n {
			if time.Now().After(deadline) {
				t.Fatalf("%d open watches, want %d", p.OpenWatches(), n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	openWatch := func(t *testing.T) watch.Interface {
		t.Helper()
		waitOpen(t, 0)
		l, err := cms.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
		waitOpen(t, 1)
		return w
	}
	next := func(w watch.Interface, d time.Duration) (watch.Event, bool) {
		select {
		case ev, ok := <-w.ResultChan():
			return ev, ok
		case <-time.After(d):
			return watch.Event{Type: "none"}, true
		}
	}

	t.Run("cut watches", func(t *testing.T) {
		w := openWatch(t)
		if n := p.CutWatches(); n < 1 {
			t.Fatalf("cut %d watches", n)
		}
		if ev, ok := next(w, 30*time.Second); ok {
			t.Errorf("after the cut: event %v, want the stream closed", ev.Type)
		}
	})

	t.Run("stall", func(t *testing.T) {
		w := openWatch(t)
		f := p.Add(apiproxy.Fault{Match: apiproxy.Match{Path: "/configmaps", Watch: apiproxy.WatchOnly}, Stall: true})
		if _, err := cms.Create(ctx, cm("during-stall"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if ev, _ := next(w, time.Second); ev.Type != "none" {
			t.Errorf("stalled watch delivered %v", ev.Type)
		}
		f.Remove()
		if f.Hits() < 1 {
			t.Errorf("stall dropped %d events, want 1", f.Hits())
		}
		if _, err := cms.Create(ctx, cm("after-stall"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if ev, _ := next(w, 30*time.Second); ev.Type != watch.Added {
			t.Errorf("after the stall: %v, want ADDED", ev.Type)
		}
	})

	t.Run("expire open and new watches", func(t *testing.T) {
		w := openWatch(t)
		f := p.Add(apiproxy.Fault{Match: apiproxy.Match{Path: "/configmaps", Watch: apiproxy.WatchOnly}, Expire: true, Times: 2})
		// A new watch is answered by the fault at once: never open.
		fresh, err := cms.Watch(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(fresh.Stop)
		for i, w := range []watch.Interface{w, fresh} {
			ev, _ := next(w, 30*time.Second)
			st, _ := ev.Object.(*metav1.Status)
			if ev.Type != watch.Error || st == nil || st.Code != http.StatusGone {
				t.Errorf("watch %d: %v %v, want ERROR 410", i, ev.Type, ev.Object)
			}
		}
		if f.Hits() != 2 {
			t.Errorf("expire hits = %d, want 2", f.Hits())
		}
		f.Remove()
	})

	if p.Requests() == 0 {
		t.Error("no request counted")
	}
}

func proxyClient(t *testing.T, kubeconfig string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}
