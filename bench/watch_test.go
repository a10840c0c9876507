package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"recond.dev/recond/reconcile"
	"recond.dev/recond/reconcile/cluster"
	"recond.dev/recond/reconcile/watch"
)

// watchLive is the watch-fed cache that --observe=watch reads, and where
// its events go once a loop runs on them.
type watchLive struct {
	*watch.Cache
	mu      sync.Mutex
	onEvent func(watch.Event) // nil until startHealing
}

func (w *watchLive) event(ev watch.Event) {
	w.mu.Lock()
	f := w.onEvent
	w.mu.Unlock()
	if f != nil {
		f(ev)
	}
}

// newWatchLive returns the watch cache for namespace ns, reading through
// cfg (so that its LISTs and WATCHes are counted) and mapping kinds with
// kube, and a function that stops it. Its informers start at the first
// observe, before the first apply, so that no drift is missed.
func newWatchLive(ctx context.Context, cfg *rest.Config, kube *cluster.Client, ns string) (*watchLive, func(), error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("dynamic client: %w", err)
	}
	w := &watchLive{}
	c, err := watch.New(ctx, dyn, kube, ns, watch.Options{OnEvent: w.event})
	if err != nil {
		return nil, nil, fmt.Errorf("watch cache: %w", err)
	}
	w.Cache = c
	return w, c.Close, nil
}

// startHealing runs rec's loop with a 3-minute interval and ticks triggered
// by live's events (an update by another manager, a delete), as recond run
// --observe=watch does, and returns a function that stops the loop and
// waits for it.
func startHealing(ctx context.Context, rec *reconcile.Reconciler, live *watchLive) (stop func(), err error) {
	live.mu.Lock()
	live.onEvent = func(ev watch.Event) { rec.Noticed(ev.Kind, ev.Name, ev.Subresource, ev.At) }
	live.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		rec.Run(ctx, 3*time.Minute, time.Minute, nil)
	}()
	return func() {
		cancel()
		<-done
		live.mu.Lock()
		live.onEvent = nil
		live.mu.Unlock()
	}, nil
}

// healLatencies drifts each ConfigMap of names once (another field
// manager's Update of data.k) and returns, for each, the time from the
// Update to the watch event that shows data.k restored. Each drift is of
// another object: the same object rewritten again within seconds is a
// fight, which recond backs off from.
func healLatencies(ctx context.Context, dyn dynamic.Interface, ns string, names []string) ([]time.Duration, error) {
	cms := dyn.Resource(gvrConfigMap).Namespace(ns)
	var out []time.Duration
	for i, name := range names {
		cur, err := cms.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return out, fmt.Errorf("get %s: %w", name, err)
		}
		want, _, _ := unstructured.NestedString(cur.Object, "data", "k")
		if err := unstructured.SetNestedField(cur.Object, fmt.Sprintf("drift-%d", i), "data", "k"); err != nil {
			return out, err
		}
		start := time.Now()
		upd, err := cms.Update(ctx, cur, metav1.UpdateOptions{FieldManager: "drifter"})
		if err != nil {
			return out, fmt.Errorf("drift %s: %w", name, err)
		}
		d, err := waitRestored(ctx, cms, name, upd.GetResourceVersion(), want, start)
		if err != nil {
			return out, err
		}
		out = append(out, d)
	}
	return out, nil
}

// waitRestored watches ConfigMap name from resourceVersion rv until an
// event shows data.k == want, and returns the time since start.
func waitRestored(ctx context.Context, cms dynamic.ResourceInterface, name, rv, want string, start time.Time) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	w, err := cms.Watch(ctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", name).String(),
		ResourceVersion: rv,
	})
	if err != nil {
		return 0, fmt.Errorf("watch %s: %w", name, err)
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		if got, _, _ := unstructured.NestedString(u.Object, "data", "k"); got == want {
			return time.Since(start), nil
		}
	}
	return 0, fmt.Errorf("%s not restored to %q within 30s: %w", name, want, context.Cause(ctx))
}
