package watch

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"recond.dev/recond/reconcile/cluster"
)

// Mapper resolves a kind to its resource and scope; a kind without a
// version resolves to the version the server prefers. *cluster.Client is
// one, and its errors (a *meta.NoKindMatchError for a kind the server does
// not serve) are returned unchanged.
type Mapper interface {
	Mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error)
}

// Defaults for Options.
const (
	DefaultRelistPeriod = 30 * time.Minute
	// RelistJitter is the fraction of the relist period added at random to
	// each relist, so that many processes started together do not relist
	// in lockstep.
	RelistJitter = 0.5
	// eventBuffer is how many events wait for OnEvent before new ones are
	// dropped (and counted).
	eventBuffer = 4096
	// syncPoll is how often a waiting List looks at an informer's sync.
	syncPoll = 5 * time.Millisecond
	// DefaultStaleAfter is two bookmark periods and some slack. The API
	// server sends a watch that allows bookmarks one about every minute
	// (and one 2 s before the watch's timeout), but only once the kind's
	// resourceVersion has moved past the watch's: any write of that
	// resource anywhere in the cluster, or etcd's progress notification
	// (every 10 min by default), moves it; on a test API server a new
	// watch's first bookmark came after 2m2s, then one every minute. So in
	// a cluster where the kind
	// changes somewhere every minute or two, a healthy informer is never
	// restarted; in a quieter one, it is restarted (one LIST) about once
	// per StaleAfter.
	DefaultStaleAfter = 2*time.Minute + 30*time.Second
)

// Options tune a Cache. The zero value is usable.
type Options struct {
	// OnEvent is called, from one goroutine of the Cache and never from an
	// informer's, for every update or delete of a cached object that the
	// field manager did not make itself. It should hand the event off and
	// return: while it runs, further events queue (eventBuffer of them,
	// then they are dropped and counted in Stats.EventsDropped).
	OnEvent func(Event)
	// Manager is recond's field manager; cluster.FieldManager when empty.
	Manager string
	// RelistPeriod is how often each informer relists in full, plus up to
	// RelistJitter of it at random; DefaultRelistPeriod when 0, never when
	// negative. A watch that stays open cannot miss an event, but a relist
	// bounds how long a missed one could go unseen.
	RelistPeriod time.Duration
	// WatchTimeout is the least time a watch request stays open; each one
	// asks for a random time in [WatchTimeout, 2*WatchTimeout), as Config
	// Sync's filtered watcher does. 0 leaves client-go's own, randomised
	// in [5m, 10m).
	WatchTimeout time.Duration
	// StaleAfter is how long an informer may go without a sign of life
	// (an event, a bookmark or a full list) before the List or Get that
	// reads it restarts it, with a fresh LIST and a new watch, and waits
	// for that sync: a watch whose stream stays open but delivers nothing
	// (a stuck proxy, a half-open connection) would otherwise hide drift
	// until its timeout or the next relist. DefaultStaleAfter when 0, never
	// when negative. It does not depend on the tick interval: events and
	// bookmarks, not ticks, keep an informer fresh, and a read of a fresh
	// one costs no request. See DefaultStaleAfter for what a quiet cluster
	// costs.
	StaleAfter time.Duration
	// CheckEvery is how often each informer's store is compared with one
	// LIST of the API server (names and resourceVersions), plus up to
	// CheckJitter of it at random: a store found behind (a watch that
	// loses events but still sends bookmarks, so that StaleAfter never
	// fires) is restarted as a stale one is. An informer that listed in
	// full within CheckEvery is not checked. DefaultCheckEvery when 0,
	// never when negative.
	CheckEvery time.Duration
	// Log receives the informers' errors and restarts; none when nil.
	Log *slog.Logger

	// expireWatch, when set and returning an error, makes the next watch
	// request fail with it instead of being sent (tests only).
	expireWatch func() error
}

// Cache answers List and Get from watch-fed informers: one per (kind,
// label selector) first asked for, kept until Close or the context given to
// New ends. It is safe for concurrent use.
type Cache struct {
	dyn       dynamic.Interface
	mapper    Mapper
	namespace string
	opts      Options
	log       *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	informers map[informerKey]*kindInformer

	events        chan pending
	gets          atomic.Int64
	syncWaitNanos atomic.Int64
	syncWaits     atomic.Int64
	dropped       atomic.Int64
	restarts      atomic.Int64
	checked       atomic.Int64
	// own are the objects recond deletes (Deleting), whose events are
	// its own.
	own ownDeletes
	// gen counts what changed the stores: every object added, changed or
	// deleted, every informer started (Generation); journal names what
	// moved it (Changes). Both move together, under journal.mu (bump).
	gen     atomic.Uint64
	journal journal
}

type informerKey struct {
	gvk      schema.GroupVersionKind
	selector string
}

// New returns a Cache for namespace. Nothing is watched until the first
// List or Get of a kind; Close (or the end of ctx) stops every informer.
func New(ctx context.Context, dyn dynamic.Interface, mapper Mapper, namespace string, opts Options) (*Cache, error) {
	if namespace == "" {
		return nil, fmt.Errorf("no namespace given")
	}
	if dyn == nil || mapper == nil {
		return nil, fmt.Errorf("watch cache needs a dynamic client and a mapper")
	}
	opts.Manager = cmp.Or(opts.Manager, cluster.FieldManager)
	opts.RelistPeriod = cmp.Or(opts.RelistPeriod, DefaultRelistPeriod)
	opts.StaleAfter = cmp.Or(opts.StaleAfter, DefaultStaleAfter)
	opts.CheckEvery = cmp.Or(opts.CheckEvery, DefaultCheckEvery)
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Cache{
		dyn: dyn, mapper: mapper, namespace: namespace, opts: opts, log: log,
		informers: map[informerKey]*kindInformer{},
		events:    make(chan pending, eventBuffer),
	}
	c.ctx, c.cancel = context.WithCancel(ctx)
	c.wg.Add(1)
	go c.dispatch()
	return c, nil
}

// Close stops every informer and waits for them to end.
func (c *Cache) Close() {
	// Under mu: a restart or a first informer adds to wg only before it.
	c.mu.Lock()
	c.cancel()
	c.mu.Unlock()
	c.wg.Wait()
}

// Namespace is the namespace the cache watches.
func (c *Cache) Namespace() string { return c.namespace }

// mapping resolves gvk as cluster.Client does, with the same errors.
func (c *Cache) mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	m, err := c.mapper.Mapping(gvk)
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() != meta.RESTScopeNameNamespace {
		return nil, fmt.Errorf("%s is cluster-scoped; recond manages only namespace %q", gvk.Kind, c.namespace)
	}
	return m, nil
}

// List returns the cached objects of kind gvk that match selector, in the
// version gvk names (or the server's preferred one), sorted by name. The
// objects are the store's own, not copies: the caller must not modify them.
// The first List of a (kind, selector) starts its informer and
// waits, within ctx, for its first sync; later ones make no API request,
// unless the informer has seen nothing for Options.StaleAfter: then it is
// restarted and List waits for the new sync, as for a first one. While the
// informer's last list or watch request has failed, List is one LIST of
// the API server (its error, when it fails too).
func (c *Cache) List(ctx context.Context, gvk schema.GroupVersionKind, selector string) ([]unstructured.Unstructured, error) {
	m, err := c.mapping(gvk)
	if err != nil {
		return nil, err
	}
	k, err := c.informer(m, selector)
	if err != nil {
		return nil, err
	}
	if err := c.waitSynced(ctx, k); err != nil {
		return nil, err
	}
	if ferr := k.failing(); ferr != nil {
		// No watch feeds the store now (the API server is down, or refuses
		// the watch): it cannot vouch for itself, the API server decides.
		// (A restart, were it stale too, would fail the same way.)
		return c.listDirect(ctx, k, m, ferr)
	}
	if k, err = c.fresh(ctx, k); err != nil {
		return nil, err
	}
	items := k.inf.GetStore().List()
	type named struct {
		name string
		u    *unstructured.Unstructured
	}
	sorted := make([]named, 0, len(items))
	for _, o := range items {
		if u, ok := o.(*unstructured.Unstructured); ok {
			sorted = append(sorted, named{u.GetName(), u})
		}
	}
	slices.SortFunc(sorted, func(a, b named) int { return strings.Compare(a.name, b.name) })
	out := make([]unstructured.Unstructured, len(sorted))
	for i, n := range sorted {
		// Not a copy: the store's objects are shared with the caller, who
		// must not modify them (reconcile.Live says so). The informer
		// replaces an object on every event, it never changes one, so
		// what List returned stays as it was.
		out[i].Object = n.u.Object
	}
	return out, nil
}

// Get returns one object, or nil when it does not exist. It answers from a
// synced informer of that exact kind and version when the object is there;
// otherwise (the store holds only label-selected objects, so a miss proves
// nothing; or the object is asked for in another version) it makes one
// API GET, counted in Stats.Gets; so does an informer whose last list or
// watch failed. A stale informer is restarted and waited for first, as
// List does.
func (c *Cache) Get(ctx context.Context, gvk schema.GroupVersionKind, name string) (*unstructured.Unstructured, error) {
	m, err := c.mapping(gvk)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	var candidates []*kindInformer
	for key, k := range c.informers {
		if key.gvk == m.GroupVersionKind {
			candidates = append(candidates, k)
		}
	}
	c.mu.Unlock()
	for _, k := range candidates {
		if !k.inf.HasSynced() || k.failing() != nil {
			continue
		}
		k, err := c.fresh(ctx, k)
		if err != nil {
			return nil, err
		}
		o, ok, err := k.inf.GetStore().GetByKey(c.namespace + "/" + name)
		if err == nil && ok {
			if u, ok := o.(*unstructured.Unstructured); ok {
				out := u.DeepCopy()
				out.SetGroupVersionKind(m.GroupVersionKind)
				return out, nil
			}
		}
	}
	c.gets.Add(1)
	u, err := c.dyn.Resource(m.Resource).Namespace(c.namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get %s/%s: %w", gvk.Kind, name, err)
	}
	return u, nil
}

// listDirect is List answered by the API server, for an informer whose
// last list or watch failed (ferr): one LIST, counted in Stats.Gets, whose
// objects are cut as the store's are. Its error says the watch's too.
func (c *Cache) listDirect(ctx context.Context, k *kindInformer, m *meta.RESTMapping, ferr error) ([]unstructured.Unstructured, error) {
	c.gets.Add(1)
	l, err := c.dyn.Resource(m.Resource).Namespace(c.namespace).List(ctx, metav1.ListOptions{LabelSelector: k.key.selector})
	if err != nil {
		return nil, fmt.Errorf("list %s (its watch failed: %v): %w", k.key.gvk.Kind, ferr, err)
	}
	trim := transform(c.opts.Manager)
	apiVersion, kind := m.GroupVersionKind.GroupVersion().String(), m.GroupVersionKind.Kind
	out := l.Items
	for i := range out {
		_, _ = trim(&out[i])
		out[i].Object["apiVersion"], out[i].Object["kind"] = apiVersion, kind
	}
	slices.SortFunc(out, func(a, b unstructured.Unstructured) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out, nil
}

// Generation counts the changes the cache's stores have seen: every
// object added, changed (a new resourceVersion) or deleted, and every
// informer started or restarted. While it does not move, what List and
// Get return has not changed since the last time it was read. ok is false
// when an informer has not synced yet, is stale (Options.StaleAfter) or
// its last list or watch request failed (no watch feeds it): the caller
// should List, which restarts a stale one and asks the API server in place
// of a failing one. It costs a clock reading per informer and makes no
// request.
func (c *Cache) Generation() (gen uint64, ok bool) {
	gen = c.gen.Load()
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range c.informers {
		if !k.inf.HasSynced() || k.failing() != nil {
			return gen, false
		}
		if c.opts.StaleAfter >= 0 {
			if _, stale := k.stale(now, c.opts.StaleAfter); stale {
				return gen, false
			}
		}
	}
	return gen, true
}

// informer returns the running informer for (m, selector), starting it the
// first time.
func (c *Cache) informer(m *meta.RESTMapping, selector string) (*kindInformer, error) {
	key := informerKey{gvk: m.GroupVersionKind, selector: selector}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.ctx.Err(); err != nil {
		return nil, fmt.Errorf("watch cache closed: %w", err)
	}
	if k, ok := c.informers[key]; ok {
		return k, nil
	}
	k := c.start(key, m, nil)
	c.informers[key] = k
	return k, nil
}

// fresh returns k when it is not stale; otherwise it restarts k and
// returns its successor once synced, after handing OnEvent the changes the
// stalled watch did not deliver (as a watch would have). Reading a fresh informer costs a
// clock reading: no request.
func (c *Cache) fresh(ctx context.Context, k *kindInformer) (*kindInformer, error) {
	if c.opts.StaleAfter < 0 {
		return k, nil
	}
	age, stale := k.stale(time.Now(), c.opts.StaleAfter)
	if !stale {
		if k.inf.HasSynced() {
			// A restart whose reader gave up before the sync: its missed
			// changes are handed on by the next read.
			c.handOnMissed(k)
		}
		return k, nil
	}
	next, err := c.restart(k, "no event or bookmark for a while: restarting the watch with a fresh list",
		"age", age.Round(time.Millisecond).String(), "stale_after", c.opts.StaleAfter.String())
	if err != nil {
		return nil, err
	}
	if err := c.waitSynced(ctx, next); err != nil {
		return nil, err
	}
	c.handOnMissed(next)
	return next, nil
}

// handOnMissed hands on what a restarted informer's stalled watch missed,
// and says so when there was something: only then had the watch stalled (a
// quiet kind gets no bookmarks, and its restart finds nothing).
func (c *Cache) handOnMissed(k *kindInformer) {
	if n := c.missed(k); n > 0 {
		c.log.Warn("watch stalled: the restarted watch found changes the old one had not delivered",
			"kind", k.key.gvk.String(), "selector", k.key.selector, "changes", n)
	}
}

// restart replaces old, which has seen nothing for a while or which a
// check found behind, by a new informer of the same key that syncs by LIST
// (a streaming list is a watch, and what stalled the watch may stall it
// too), and logs why (msg, attrs). Of two that find old stale, the second
// gets the first one's successor.
func (c *Cache) restart(old *kindInformer, msg string, attrs ...any) (*kindInformer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.ctx.Err(); err != nil {
		return nil, fmt.Errorf("watch cache closed: %w", err)
	}
	if cur, ok := c.informers[old.key]; ok && cur != old {
		return cur, nil
	}
	old.cancel()
	k := c.start(old.key, old.mapping, old)
	c.informers[old.key] = k
	c.restarts.Add(1)
	c.log.Info(msg, append([]any{"kind", old.key.gvk.String(), "selector", old.key.selector}, attrs...)...)
	return k, nil
}

// waitSynced waits for k's first sync, the end of ctx, or an error that
// retrying will not cure (forbidden, unauthorised, resource gone): the
// reflector would retry those forever, so k is dropped (the next List
// starts afresh) and the error returned as a LIST's would be.
func (c *Cache) waitSynced(ctx context.Context, k *kindInformer) error {
	if k.inf.HasSynced() {
		return nil
	}
	start := time.Now()
	defer func() {
		c.syncWaitNanos.Add(int64(time.Since(start)))
		c.syncWaits.Add(1)
	}()
	t := time.NewTicker(syncPoll)
	defer t.Stop()
	for {
		if k.inf.HasSynced() {
			return nil
		}
		select {
		case <-ctx.Done():
			k.mu.Lock()
			last := k.lastErr
			k.mu.Unlock()
			if last != nil {
				// What kept it from syncing, for the log and the span.
				return fmt.Errorf("wait for %s cache (its list or watch last failed: %v): %w", k.key.gvk.Kind, last, context.Cause(ctx))
			}
			return fmt.Errorf("wait for %s cache: %w", k.key.gvk.Kind, context.Cause(ctx))
		case <-c.ctx.Done():
			return fmt.Errorf("wait for %s cache: watch cache closed", k.key.gvk.Kind)
		case <-k.failed:
			c.drop(k)
			return fmt.Errorf("list %s: %w", k.key.gvk.Kind, k.failErr)
		case <-t.C:
		}
	}
}

// drop stops k and forgets it, unless it was already replaced.
func (c *Cache) drop(k *kindInformer) {
	c.mu.Lock()
	if c.informers[k.key] == k {
		delete(c.informers, k.key)
	}
	c.mu.Unlock()
	k.cancel()
}

// terminal reports whether a list/watch error will not go away by itself.
func terminal(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) ||
		apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err)
}

// Stats are the Cache's counters since New. Counters only grow: subtract
// two snapshots for what one tick cost.
type Stats struct {
	// Gets is the API GETs made by Get (store misses, other versions).
	Gets int64
	// SyncWaits is how many List calls waited for a first sync, and
	// SyncWait the time they waited in all.
	SyncWaits int64
	SyncWait  time.Duration
	// EventsDropped is the events not handed to OnEvent because it was
	// behind by more than the buffer.
	EventsDropped int64
	// Restarts is how many informers were restarted because they had seen
	// nothing for Options.StaleAfter, or because a check found their store
	// behind the API server.
	Restarts int64
	// Checks is the checks of a store against a LIST of the API server
	// (Options.CheckEvery).
	Checks int64
	// Own is the events not handed to OnEvent because they were recond's
	// own: its applies (an update whose only managedFields change is in
	// recond's entries) and its deletes (Deleting).
	Own int64
	// Kinds describes each informer, sorted by kind and selector.
	Kinds []KindStats
}

// KindStats describes one informer.
type KindStats struct {
	GroupVersionKind schema.GroupVersionKind
	Selector         string
	Synced           bool
	Objects          int
	// Lists is the full lists the informer made (its first sync, the
	// periodic relists, relists after a 410 Expired, and the sync of each
	// restart); Watches the watch requests that resumed from a known
	// resourceVersion; Restarts the times it was found stale and replaced
	// (the counts carry over to the replacement); Checks the checks of its
	// store against a LIST (Options.CheckEvery).
	Lists, Watches, Restarts, Checks int
	// LastSeen is when the informer last saw an event, a bookmark or the
	// answer to a full list, and Age the time since (at the time of Stats).
	LastSeen time.Time
	Age      time.Duration
	// Err is the last list or watch error, nil once a list succeeds again.
	Err error
}

// Age is the age of the stalest informer (0 with none): how old, at
// worst, the picture List gives may be.
func (s Stats) Age() time.Duration {
	var age time.Duration
	for _, k := range s.Kinds {
		age = max(age, k.Age)
	}
	return age
}

// Stats returns the counters and each informer's state.
func (c *Cache) Stats() Stats {
	s := Stats{
		Gets: c.gets.Load(), SyncWaits: c.syncWaits.Load(),
		SyncWait: time.Duration(c.syncWaitNanos.Load()), EventsDropped: c.dropped.Load(),
		Restarts: c.restarts.Load(), Checks: c.checked.Load(), Own: c.own.events.Load(),
	}
	c.mu.Lock()
	ks := make([]*kindInformer, 0, len(c.informers))
	for _, k := range c.informers {
		ks = append(ks, k)
	}
	c.mu.Unlock()
	now := time.Now()
	for _, k := range ks {
		k.mu.Lock()
		st := KindStats{
			GroupVersionKind: k.key.gvk, Selector: k.key.selector, Synced: k.inf.HasSynced(),
			Objects: len(k.inf.GetStore().ListKeys()), Lists: k.lists, Watches: k.watches,
			Restarts: k.restarts, Checks: k.checks, LastSeen: k.lastSeen, Err: k.lastErr,
		}
		k.mu.Unlock()
		if !st.LastSeen.IsZero() {
			st.Age = now.Sub(st.LastSeen)
		}
		s.Kinds = append(s.Kinds, st)
	}
	slices.SortFunc(s.Kinds, func(a, b KindStats) int {
		return strings.Compare(a.GroupVersionKind.String()+" "+a.Selector, b.GroupVersionKind.String()+" "+b.Selector)
	})
	return s
}
