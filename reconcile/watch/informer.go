package watch

import (
	"context"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
)

// kindInformer is one informer of the Cache and what it has seen.
type kindInformer struct {
	key     informerKey
	mapping *meta.RESTMapping
	inf     cache.SharedIndexInformer
	cancel  context.CancelFunc
	// restartOf is the stale informer this one replaced, until missed
	// has compared their stores (under mu).
	restartOf *kindInformer

	// failed is closed, with failErr set, when a list or watch error that
	// retrying will not cure happens before the first sync.
	failed   chan struct{}
	failErr  error
	failOnce sync.Once

	mu       sync.Mutex
	lists    int
	watches  int
	restarts int
	checks   int
	lastSeen time.Time
	// listedAt is when the informer's last full list succeeded, checkedAt
	// when a check last found its store as the API server's (check.go).
	listedAt, checkedAt time.Time
	// lastErr is the error of the last list or watch request, nil once
	// one succeeds.
	lastErr  error
	relistAt time.Time
}

// start builds and runs the informer for key. With prev, the informer it
// replaces, it carries prev's counts on and syncs by LIST. The caller holds
// c.mu.
func (c *Cache) start(key informerKey, m *meta.RESTMapping, prev *kindInformer) *kindInformer {
	ctx, cancel := context.WithCancel(c.ctx)
	k := &kindInformer{key: key, mapping: m, cancel: cancel, failed: make(chan struct{}), restartOf: prev}
	var lw cache.ListerWatcher = c.listWatch(k, c.dyn.Resource(m.Resource).Namespace(c.namespace))
	if prev != nil {
		prev.mu.Lock()
		k.lists, k.watches, k.restarts, k.checks = prev.lists, prev.watches, prev.restarts+1, prev.checks
		prev.mu.Unlock()
		lw = listOnly{lw.(*cache.ListWatch)}
	}
	k.inf = cache.NewSharedIndexInformerWithOptions(lw, &unstructured.Unstructured{},
		cache.SharedIndexInformerOptions{ObjectDescription: key.gvk.String()})
	// Neither call can fail before Run.
	// The store's objects carry the apiVersion and kind asked for, set once
	// here, so that List can hand them out without copying them.
	trim := transform(c.opts.Manager)
	apiVersion, kind := m.GroupVersionKind.GroupVersion().String(), m.GroupVersionKind.Kind
	_ = k.inf.SetTransform(func(obj any) (any, error) {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			u.Object["apiVersion"], u.Object["kind"] = apiVersion, kind
		}
		return trim(obj)
	})
	_ = k.inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		k.mu.Lock()
		k.lastErr = err
		k.mu.Unlock()
		if terminal(err) && !k.inf.HasSynced() {
			k.failOnce.Do(func() { k.failErr = err; close(k.failed) })
		}
		c.log.Warn("watch failed", "kind", key.gvk.String(), "selector", key.selector, "error", err)
	})
	_, _ = k.inf.AddEventHandler(c.handler(key.gvk.GroupKind()))
	c.bump(key.gvk.GroupKind(), nil)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		k.inf.RunWithContext(ctx)
	}()
	if c.opts.CheckEvery > 0 {
		c.wg.Add(1)
		go c.checks(ctx, k)
	}
	return k
}

// listOnly makes the reflector sync by LIST, never by a streaming list
// (client-go's WatchListClient: a watch asking for its initial events).
type listOnly struct{ *cache.ListWatch }

// IsWatchListSemanticsUnSupported is what client-go's reflector asks.
func (listOnly) IsWatchListSemanticsUnSupported() bool { return true }

// listWatch is the informer's ListerWatcher: label-selected, counting full
// lists and watches, with the Cache's watch timeout and relist period.
func (c *Cache) listWatch(k *kindInformer, ri dynamic.ResourceInterface) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = k.key.selector
			k.noteList(c.opts.RelistPeriod)
			l, err := ri.List(ctx, o)
			if err != nil {
				k.noteErr(ctx, err)
				return l, err
			}
			k.listed()
			return l, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = k.key.selector
			// A watch asking for initial events is a list (client-go's
			// streaming list); any other resumes from a resourceVersion.
			if o.SendInitialEvents != nil && *o.SendInitialEvents {
				k.noteList(c.opts.RelistPeriod)
			} else {
				k.noteWatch()
				if c.opts.expireWatch != nil {
					if err := c.opts.expireWatch(); err != nil {
						return nil, err
					}
				}
			}
			if c.opts.WatchTimeout > 0 {
				secs := int64(watchTimeout(c.opts.WatchTimeout, rand.Float64()).Seconds())
				o.TimeoutSeconds = &secs
			}
			w, err := ri.Watch(ctx, o)
			if err != nil {
				// The reflector retries some failures (connection refused,
				// 429) without telling its error handler: noted here, so
				// that the cache does not vouch for a store that no watch
				// feeds.
				k.noteErr(ctx, err)
				return nil, err
			}
			k.clearErr()
			return k.proxy(w), nil
		},
	}
}

// relistDelay is period plus up to RelistJitter of it, r in [0, 1).
func relistDelay(period time.Duration, r float64) time.Duration {
	return period + time.Duration(r*RelistJitter*float64(period))
}

// watchTimeout is a watch request's timeout, r in [0, 1): in [min, 2*min),
// and never under a second (the API takes whole seconds).
func watchTimeout(min time.Duration, r float64) time.Duration {
	d := min + time.Duration(r*float64(min))
	return max(d, time.Second).Truncate(time.Second)
}

func (k *kindInformer) noteList(period time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.lists++
	if period > 0 {
		k.relistAt = time.Now().Add(relistDelay(period, rand.Float64()))
	}
}

func (k *kindInformer) noteWatch() {
	k.mu.Lock()
	k.watches++
	k.mu.Unlock()
}

func (k *kindInformer) clearErr() {
	k.mu.Lock()
	k.lastErr = nil
	k.mu.Unlock()
}

// noteErr records a failed list or watch request, unless it failed because
// the informer is being stopped.
func (k *kindInformer) noteErr(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	k.mu.Lock()
	k.lastErr = err
	k.mu.Unlock()
}

// listed records a full list that succeeded: the truth as of now.
func (k *kindInformer) listed() {
	now := time.Now()
	k.mu.Lock()
	k.lastErr = nil
	k.lastSeen, k.listedAt = now, now
	k.mu.Unlock()
}

// failing returns the error of the informer's last list or watch request,
// nil when it succeeded: while it is set, no watch feeds the store.
func (k *kindInformer) failing() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.lastErr
}

// stale reports whether k, synced, has seen nothing for longer than after,
// and for how long.
func (k *kindInformer) stale(now time.Time, after time.Duration) (time.Duration, bool) {
	if !k.inf.HasSynced() {
		return 0, false
	}
	k.mu.Lock()
	seen := k.lastSeen
	k.mu.Unlock()
	if seen.IsZero() {
		return 0, false
	}
	age := now.Sub(seen)
	return age, age > after
}

func (k *kindInformer) touch() {
	now := time.Now()
	k.mu.Lock()
	k.lastSeen = now
	k.mu.Unlock()
}

// expired is what the server sends when a watch's resourceVersion has been
// compacted away; the reflector answers it with a relist.
var expired = &metav1.Status{
	Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonExpired,
	Message: "periodic relist",
}

// proxy passes w's events through, noting when each (bookmarks included)
// was seen, and ends the watch with a 410 Expired when the relist is due,
// so that the reflector relists by the same path a compaction takes.
func (k *kindInformer) proxy(w watch.Interface) watch.Interface {
	p := &seenWatch{out: make(chan watch.Event), stop: make(chan struct{})}
	k.mu.Lock()
	relistAt := k.relistAt
	k.mu.Unlock()
	go func() {
		defer close(p.out)
		defer w.Stop()
		var relist <-chan time.Time
		if !relistAt.IsZero() {
			t := time.NewTimer(time.Until(relistAt))
			defer t.Stop()
			relist = t.C
		}
		in := w.ResultChan()
		for {
			select {
			case ev, ok := <-in:
				if !ok {
					return
				}
				if ev.Type != watch.Error {
					k.touch()
				}
				select {
				case p.out <- ev:
				case <-p.stop:
					return
				}
			case <-relist:
				select {
				case p.out <- watch.Event{Type: watch.Error, Object: expired.DeepCopy()}:
				case <-p.stop:
				}
				return
			case <-p.stop:
				return
			}
		}
	}()
	return p
}

// seenWatch is the watch.Interface proxy returns.
type seenWatch struct {
	out  chan watch.Event
	stop chan struct{}
	once sync.Once
}

func (p *seenWatch) Stop()                          { p.once.Do(func() { close(p.stop) }) }
func (p *seenWatch) ResultChan() <-chan watch.Event { return p.out }

// pending is an informer notification waiting to be classified.
type pending struct {
	kind     string
	old, new *unstructured.Unstructured // old nil for a delete
	at       time.Time
}

// handler hands the informer's updates and deletes to dispatch without
// blocking it; adds are not drift (recond created the object, or someone
// gave it recond's labels) and make no event.
func (c *Cache) handler(gk schema.GroupKind) cache.ResourceEventHandler {
	send, kind := c.send, gk.Kind
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			u, _ := obj.(*unstructured.Unstructured)
			c.bump(gk, u)
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*unstructured.Unstructured)
			n, ok2 := newObj.(*unstructured.Unstructured)
			if !ok1 || !ok2 || o.GetResourceVersion() == n.GetResourceVersion() {
				return // a relist's unchanged object
			}
			c.bump(gk, n)
			if c.opts.OnEvent == nil {
				return
			}
			send(pending{kind: kind, old: o, new: n, at: time.Now()})
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			u, _ := obj.(*unstructured.Unstructured)
			c.bump(gk, u)
			if c.opts.OnEvent == nil || u == nil {
				return
			}
			send(pending{kind: kind, new: u, at: time.Now()})
		},
	}
}

// send hands p to dispatch, or drops it (counted) when dispatch is behind.
func (c *Cache) send(p pending) {
	select {
	case c.events <- p:
	default:
		c.dropped.Add(1)
	}
}

// missed hands to OnEvent, once, what the stalled watch of the informer k
// replaced did not deliver: the objects k, synced, shows changed or gone.
// They are drift a watch would have shown (or recond's own writes, which
// dispatch filters out as it does a watch's).
func (c *Cache) missed(k *kindInformer) int {
	k.mu.Lock()
	old := k.restartOf
	k.restartOf = nil // once, and the old store can go
	k.mu.Unlock()
	if old == nil || c.opts.OnEvent == nil {
		return 0
	}
	n := 0
	now := time.Now()
	was := map[string]*unstructured.Unstructured{}
	for _, o := range old.inf.GetStore().List() {
		if u, ok := o.(*unstructured.Unstructured); ok {
			was[u.GetName()] = u
		}
	}
	for _, o := range k.inf.GetStore().List() {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		if w, ok := was[u.GetName()]; ok {
			delete(was, u.GetName())
			if w.GetResourceVersion() != u.GetResourceVersion() {
				c.send(pending{kind: k.key.gvk.Kind, old: w, new: u, at: now})
				n++
			}
		}
	}
	for _, w := range was {
		c.send(pending{kind: k.key.gvk.Kind, new: w, at: now})
		n++
	}
	return n
}

// dispatch classifies notifications and calls OnEvent, one at a time.
func (c *Cache) dispatch() {
	defer c.wg.Done()
	for {
		select {
		case <-c.ctx.Done():
			return
		case p := <-c.events:
			if c.ownDelete(p) {
				c.own.events.Add(1)
				continue
			}
			ev := Event{Kind: p.kind, Name: p.new.GetName(), Type: EventDelete, At: p.at}
			if p.old != nil {
				own, mgr, sub := classifyUpdate(p.old, p.new, c.opts.Manager)
				if own {
					c.own.events.Add(1)
					continue
				}
				ev.Type, ev.Manager, ev.Subresource = EventUpdate, mgr, sub
			}
			c.opts.OnEvent(ev)
		}
	}
}
