package reconcile

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"recond.dev/recond/reconcile/diff"
	"recond.dev/recond/reconcile/watch"
)

// LiveChanges is implemented by a Live that can name the objects that
// changed since a generation (the watch cache): an incremental tick reads
// those again, one by one, instead of listing every kind.
type LiveChanges interface {
	LiveGeneration
	// Changes names the objects whose entries changed after generation
	// since, ok false when it cannot tell (watch.Cache.Changes).
	Changes(since uint64) (changed []watch.Changed, ok bool)
	// Object is one object as List(gvk, selector) would return it
	// (watch.Cache.Object).
	Object(ctx context.Context, gvk schema.GroupVersionKind, selector, name string) (u *unstructured.Unstructured, found, ok bool, err error)
}

// maxDelta is the most objects an incremental tick reads again: beyond
// it, the full walk costs little more.
const maxDelta = 256

// deltaMemo is what a tick leaves for the next one to be incremental: the
// live objects it worked with, what its diff and health phases found for
// each, and the objects it wrote (read again by the next tick whatever
// the watches say). A tick asked for by a watch event, at the same
// revision and render, whose watch cache names the objects changed since
// (LiveChanges), reads, compares and assesses only those (and the ones
// written), and takes the rest from the memo: what a full tick would
// find, at the cost of the change, not of the namespace. Anything else
// (a new revision or render, a cache restarted or relisted since, more
// changes than it remembers or than maxDelta, a failed tick, a
// suspension, hooks, objects terminating, orphaned or in a fight, an
// inventory whose kinds moved, health with a progress deadline ahead, a
// tick asked for by hand) makes a full tick.
type deltaMemo struct {
	revision string
	desired  []*unstructured.Unstructured
	// gen is the watch cache's generation when the tick's observe began.
	gen uint64
	// kinds are the kinds observe listed, in the version it listed them;
	// invKinds the inventory's kinds at the end of the tick.
	kinds    map[schema.GroupKind]schema.GroupVersionKind
	invKinds []schema.GroupVersionKind
	// live is the tick's live objects, liveIdx their index by objectKey
	// (owned by the memo: the next tick takes both and changes them).
	live    []*unstructured.Unstructured
	liveIdx map[string]int
	// skipped and equivalent are the diff's findings.
	skipped    []Skip
	equivalent []string
	// carry are the objects the tick wrote or deleted.
	carry []objectName
	// owned is what the tick's apply left of the objects the instance
	// owns (nil: the next tick finds them walking every live object).
	owned *ownership
	// health is the health phase's finding, healthIdx the index of each
	// object in health.Objects by objectKey; healthUntil as in quietMemo.
	health      *Health
	healthIdx   map[string]int
	healthUntil time.Time
}

// objectName names an object across API versions.
type objectName struct {
	gk   schema.GroupKind
	name string
}

func (o objectName) key() string {
	if o.gk.Group == "" {
		return o.gk.Kind + "/" + o.name
	}
	return o.gk.Kind + "." + o.gk.Group + "/" + o.name
}

// deltaTick is what an incremental tick works on: the memo it builds on
// and the objects it reads again.
type deltaTick struct {
	base *deltaMemo
	// keys are the objectKeys read again; names their "Kind/name".
	keys  map[string]bool
	names map[string]bool
	// desired are the desired objects among them, in the render's order;
	// live the live ones, byKey by objectKey.
	desired []*unstructured.Unstructured
	live    []*unstructured.Unstructured
	byKey   map[string]*unstructured.Unstructured
	// incrementalHealth is set when the health phase assessed only them.
	incrementalHealth bool
}

// desiredIndex is where each object of a render is in it, made once per
// render (memory.indexOf).
type desiredIndex struct {
	desired []*unstructured.Unstructured
	byKey   map[string]int
	byName  map[string]int
	// ambiguous is set when two desired objects share kind and name (in
	// different API groups): "Kind/name" does not tell them apart, and no
	// tick at this render is incremental.
	ambiguous bool
	// kinds are the render's kinds as the inventory records them
	// (desiredKinds), made once.
	kindsOnce sync.Once
	kinds     []schema.GroupVersionKind
}

func newDesiredIndex(desired []*unstructured.Unstructured) *desiredIndex {
	ix := &desiredIndex{desired: desired, byKey: make(map[string]int, len(desired)), byName: make(map[string]int, len(desired))}
	for i, d := range desired {
		ix.byKey[objectKey(d)] = i
		n := d.GetKind() + "/" + d.GetName()
		if _, dup := ix.byName[n]; dup {
			ix.ambiguous = true
			continue
		}
		ix.byName[n] = i
	}
	return ix
}

// byRank orders "Kind/name"s as a tick reports its objects: the desired
// ones in the render's order, then the others by name.
func (ix *desiredIndex) byRank(a, b string) int {
	ra, oka := ix.byName[a]
	rb, okb := ix.byName[b]
	switch {
	case oka && okb:
		return cmp.Compare(ra, rb)
	case oka:
		return -1
	case okb:
		return 1
	}
	return strings.Compare(a, b)
}

// order sorts the diff's lists of objects (skipped, equivalent) in the
// order byRank, stably: the order a full tick and an incremental one both
// give, whatever order they found them in.
func (t *tick) order() {
	st := t.st
	if len(st.Skipped) < 2 && len(st.Equivalent) < 2 {
		return
	}
	ix := t.r.mem.indexOf(st.Desired)
	slices.SortStableFunc(st.Skipped, func(a, b Skip) int { return ix.byRank(a.Kind+"/"+a.Name, b.Kind+"/"+b.Name) })
	slices.SortStableFunc(st.Equivalent, ix.byRank)
}

// deltaFor returns what an incremental tick works on, nil when the tick
// must walk everything. It reads the objects the watch cache names as
// changed since the memo's tick, and those that tick wrote, from the
// cache (no request), the way the full observe would: a desired object
// the owner-labelled store lacks is looked for unowned (one GET, where
// the full walk lists its kind), one desired in another version is read
// in its own. On success the memo is taken (the tick now owns it).
func (t *tick) deltaFor(ctx context.Context, invKinds []schema.GroupVersionKind) *deltaTick {
	r, st := t.r, t.st
	lc, ok := r.live.(LiveChanges)
	if !ok || !st.genOK || st.trigger == TriggerManual || st.suspension.Active != nil || len(st.Hooks) > 0 || r.cfg.DryRun {
		return nil
	}
	b := r.mem.peekDelta()
	if b == nil || b.revision != st.Revision || !sameSlice(b.desired, st.Desired) || !slices.Equal(b.invKinds, invKinds) {
		return nil
	}
	changed, ok := lc.Changes(b.gen)
	if !ok || len(changed)+len(b.carry) > maxDelta {
		return nil
	}
	ix := r.mem.indexOf(st.Desired)
	if ix.ambiguous {
		return nil
	}
	d := &deltaTick{base: b, keys: map[string]bool{}, names: map[string]bool{}, byKey: map[string]*unstructured.Unstructured{}}
	var names []objectName
	add := func(o objectName) {
		if k := o.key(); !d.keys[k] {
			d.keys[k] = true
			d.names[o.gk.Kind+"/"+o.name] = true
			names = append(names, o)
		}
	}
	for _, c := range changed {
		add(objectName{gk: schema.GroupKind{Group: c.Group, Kind: c.Kind}, name: c.Name})
	}
	for _, o := range b.carry {
		add(o)
	}
	selector := ownerSelector(r.cfg.Name)
	type read struct {
		key string
		u   *unstructured.Unstructured
	}
	reads := make([]read, 0, len(names))
	for _, o := range names {
		k := o.key()
		di, desired := ix.byKey[k]
		gvk, listed := b.kinds[o.gk]
		if !listed {
			if desired {
				return nil
			}
			continue // a kind the tick does not read (the inventory's)
		}
		u, found, ok, err := lc.Object(ctx, gvk, selector, o.name)
		if err != nil || !ok {
			return nil
		}
		if !found && desired {
			// Not owned (any more): the full walk's unfiltered LIST of the
			// kind would find it, if it exists.
			gctx, span := startSpan(ctx, "recond.get", kindAttr(gvk.Kind), attribute.String("k8s.name", o.name))
			u, err = r.kube.Get(gctx, gvk, o.name)
			endSpan(span, err)
			if err != nil {
				return nil
			}
		}
		if u != nil && desired {
			if want := st.Desired[di].GroupVersionKind(); u.GroupVersionKind().Version != want.Version {
				gctx, span := startSpan(ctx, "recond.get", kindAttr(want.Kind), attribute.String("k8s.name", o.name),
					attribute.String("k8s.api_version", want.GroupVersion().String()))
				v, err := r.live.Get(gctx, want, o.name)
				endSpan(span, err)
				if err != nil {
					return nil
				}
				if v != nil {
					u = v
				}
			}
		}
		reads = append(reads, read{key: k, u: u})
	}
	if _, ok := lc.Changes(b.gen); !ok {
		// A store restarted while it was read (found stale): the rest of
		// the memo may be behind it.
		return nil
	}
	if r.mem.takeDelta() != b {
		return nil
	}
	// The memo's live objects, with those read again in place, and what
	// the instance owns of them.
	live := slices.Clone(b.live)
	for _, rd := range reads {
		if b.owned != nil {
			b.owned.disown(rd.key)
			if rd.u != nil && ownedBy(rd.u.GetLabels(), r.cfg.Name) {
				b.owned.own(rd.key, rd.u)
			}
		}
		i, had := b.liveIdx[rd.key]
		switch {
		case rd.u != nil && had:
			live[i] = rd.u
		case rd.u != nil:
			b.liveIdx[rd.key] = len(live)
			live = append(live, rd.u)
		case had:
			last := live[len(live)-1]
			live[i] = last
			b.liveIdx[objectKey(last)] = i
			live = live[:len(live)-1]
			delete(b.liveIdx, rd.key)
		}
		if rd.u != nil {
			d.byKey[rd.key] = rd.u
			d.live = append(d.live, rd.u)
		}
	}
	var at []int
	for k := range d.keys {
		if i, ok := ix.byKey[k]; ok {
			at = append(at, i)
		}
	}
	slices.Sort(at)
	for _, i := range at {
		d.desired = append(d.desired, st.Desired[i])
	}
	b.live = live
	st.listed = b.kinds
	return d
}

// merge completes an incremental diff: the memo's findings for every
// object not read again, with this tick's for those read.
func (d *deltaTick) merge(st *State) {
	b := d.base
	var skipped []Skip
	for _, s := range b.skipped {
		if !d.names[s.Kind+"/"+s.Name] {
			skipped = append(skipped, s)
		}
	}
	st.Skipped = append(skipped, st.Skipped...)
	var equivalent []string
	for _, e := range b.equivalent {
		if !d.names[e] {
			equivalent = append(equivalent, e)
		}
	}
	st.Equivalent = append(equivalent, st.Equivalent...)
}

// keepDelta records, at the end of a tick, what the next one may build
// on (deltaMemo): a tick that succeeded and left nothing pending but the
// writes it made (read again by the next tick) leaves a memo; any other
// drops it. A quiet tick keeps the memo there is.
func (t *tick) keepDelta(res *Result) {
	r, st := t.r, t.st
	incremental := st.delta != nil
	if st.quiet != nil && res.Failure() == nil {
		return
	}
	if !st.genOK || res.Failure() != nil || st.inv == nil || st.listed == nil || st.Health == nil ||
		len(st.Terminating) > 0 || len(st.BackingOff) > 0 || len(st.HooksWaiting) > 0 || len(st.Hooks) > 0 ||
		len(st.Orphans) > 0 || len(st.Orphaned) > 0 || len(st.Deferred) > 0 || len(st.unserved) > 0 ||
		len(st.Rejected) > 0 || len(st.misspelt) > 0 || st.suspension.Active != nil || st.Counts.NotWritten > 0 ||
		r.cfg.DryRun || len(st.recreates.keys) > 0 {
		r.mem.setDelta(nil, incremental)
		return
	}
	for _, k := range st.inv.Kinds {
		if _, ok := st.listed[k.GroupKind()]; !ok {
			// The next full tick lists a kind this one did not.
			r.mem.setDelta(nil, incremental)
			return
		}
	}
	// Every change was written: the next tick reads those objects again.
	written := make(map[string]bool, len(st.Ops))
	var carry []objectName
	for _, op := range st.Ops {
		if op.Err != nil {
			r.mem.setDelta(nil, incremental)
			return
		}
		group, _, found := strings.Cut(op.APIVersion, "/")
		if !found {
			group = ""
		}
		o := objectName{gk: schema.GroupKind{Group: group, Kind: op.Kind}, name: op.Name}
		written[o.key()] = true
		carry = append(carry, o)
	}
	for _, c := range st.Changes {
		if !written[changeKey(c)] {
			r.mem.setDelta(nil, incremental)
			return
		}
	}
	if r.mem.indexOf(st.Desired).ambiguous {
		r.mem.setDelta(nil, incremental)
		return
	}
	m := &deltaMemo{revision: st.Revision, desired: st.Desired, gen: st.gen, kinds: st.listed,
		invKinds: slices.Clone(st.inv.Kinds), live: st.Live, skipped: st.Skipped, equivalent: st.Equivalent,
		carry: carry, owned: st.owned, health: st.Health, healthUntil: st.healthUntil}
	if d := st.delta; d != nil {
		m.liveIdx = d.base.liveIdx
	} else {
		m.liveIdx = make(map[string]int, len(st.Live))
		for i, l := range st.Live {
			m.liveIdx[objectKey(l)] = i
		}
	}
	if d := st.delta; d != nil && d.incrementalHealth {
		m.healthIdx = d.base.healthIdx
	} else {
		m.healthIdx = make(map[string]int, len(st.Health.Objects))
		for i, o := range st.Health.Objects {
			m.healthIdx[refKey(o.Ref)] = i
		}
	}
	r.mem.setDelta(m, incremental)
}

// refKey is objectKey for an ObjectRef.
func refKey(ref ObjectRef) string {
	group, _, found := strings.Cut(ref.APIVersion, "/")
	if !found || group == "" {
		return ref.Kind + "/" + ref.Name
	}
	return ref.Kind + "." + group + "/" + ref.Name
}

// spanDelta marks an incremental observe's span.
func spanDelta(ctx context.Context, d *deltaTick) {
	trace.SpanFromContext(ctx).SetAttributes(attribute.Bool("recond.tick.incremental", true),
		attribute.Int("recond.objects.changed", len(d.keys)))
}

// changeKey is objectKey for a change.
func changeKey(c diff.Change) string {
	if c.Desired != nil {
		return objectKey(c.Desired)
	}
	return objectKey(c.Live)
}
