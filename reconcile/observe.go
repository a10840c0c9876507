package reconcile

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"recond.dev/recond/reconcile/inventory"
)

// observe lists, once per kind, the objects this instance owns: every kind
// Git names and every kind the inventory says it has applied. A kind with
// desired objects not found that way is listed once more, unfiltered, to
// find those that exist unowned (no GET per object: a first sync of
// thousands of objects costs one more LIST per kind).
func (t *tick) observe(ctx context.Context) error {
	r, st := t.r, t.st
	// Read before anything else: a change after it moves it, and makes the
	// next tick a full one.
	st.gen, st.genOK = liveGeneration(r.live)
	inv, err := inventoryStore{r}.load(ctx, st)
	if err != nil {
		return err
	}
	if q := t.quietFor(st.gen, st.genOK); q != nil {
		// Nothing the watches see has changed since the last full tick,
		// which found nothing to do: its live objects are still what the
		// caches hold.
		st.quiet, st.Live = q, q.live
		trace.SpanFromContext(ctx).SetAttributes(attribute.Bool("recond.tick.quiet", true))
		return nil
	}
	if d := t.deltaFor(ctx, inv.Kinds); d != nil {
		// Only the objects the watches saw change since the last tick, and
		// those it wrote, are read again (observe_delta.go).
		st.delta, st.Live = d, d.base.live
		spanDelta(ctx, d)
		return nil
	}
	var kinds []schema.GroupVersionKind
	seenKind := map[schema.GroupKind]bool{}
	addKind := func(k schema.GroupVersionKind) {
		if !seenKind[k.GroupKind()] {
			seenKind[k.GroupKind()] = true
			kinds = append(kinds, k)
		}
	}
	for _, d := range st.Desired {
		addKind(d.GroupVersionKind())
	}
	// A kind only the inventory names is listed in whatever version the
	// server serves now: the one recorded may have been retired.
	for _, k := range inv.Kinds {
		addKind(schema.GroupVersionKind{Group: k.Group, Kind: k.Kind})
	}
	st.listed = make(map[schema.GroupKind]schema.GroupVersionKind, len(kinds))
	for _, k := range kinds {
		st.listed[k.GroupKind()] = k
	}
	selector := ownerSelector(r.cfg.Name)
	found := map[string]bool{}
	var live []*unstructured.Unstructured
	for _, k := range kinds {
		lctx, span := startSpan(ctx, "recond.list", kindAttr(k.Kind), attribute.String("k8s.label_selector", selector))
		items, err := r.live.List(lctx, k, selector)
		span.SetAttributes(attribute.Int("recond.objects.count", len(items)))
		endSpan(span, err)
		var noKind *meta.NoKindMatchError
		if errors.As(err, &noKind) && !st.desiresKind(k) {
			// A kind applied once whose API is gone (CRD removed): nothing
			// left to list or prune.
			// Kept in the inventory: its objects are pruned once it is
			// served again.
			r.log.WarnContext(ctx, "kind from inventory not served; skipping it this tick", "kind", k.GroupKind().String())
			st.unserved = append(st.unserved, inventoryKind(inv, k.GroupKind()))
			continue
		}
		if err != nil {
			return err
		}
		for i := range items {
			live = append(live, &items[i])
			found[objectKey(&items[i])] = true
		}
	}
	// A desired object the owner-labelled LIST did not return may exist
	// unowned (made by hand, or by a recond that lost its labels): one
	// unfiltered LIST of its kind tells, whatever the number of such
	// objects (a first sync misses them all).
	missing := map[schema.GroupKind]int{}
	for _, d := range st.Desired {
		if !found[objectKey(d)] {
			missing[d.GroupVersionKind().GroupKind()]++
		}
	}
	for _, k := range kinds {
		if missing[k.GroupKind()] == 0 {
			continue
		}
		unowned, err := t.listUnowned(ctx, k, found)
		if err != nil {
			return err
		}
		live = append(live, unowned...)
	}
	// A kind Git names in two versions (autoscaling/v1 and v2
	// HorizontalPodAutoscalers) is listed in the first; an object desired in
	// another version is read again in its own, so that the diff compares
	// like with like.
	index := map[string]int{}
	for i, l := range live {
		index[objectKey(l)] = i
	}
	for _, d := range st.Desired {
		i, ok := index[objectKey(d)]
		if !ok || live[i].GroupVersionKind().Version == d.GroupVersionKind().Version {
			continue
		}
		gctx, span := startSpan(ctx, "recond.get", kindAttr(d.GetKind()), attribute.String("k8s.name", d.GetName()),
			attribute.String("k8s.api_version", d.GetAPIVersion()))
		u, err := r.live.Get(gctx, d.GroupVersionKind(), d.GetName())
		endSpan(span, err)
		if err != nil {
			return err
		}
		if u != nil {
			live[i] = u
		}
	}
	st.Live = live
	return nil
}

// listUnowned lists every object of kind k in the namespace and returns
// those that a desired object names and the owner-labelled LIST did not
// return (found). Nothing else is kept: an object Git does not name is not
// recond's, and must not look like something to prune. The LIST goes to the
// API server whatever Live is: a watch cache would have to start, and keep,
// an informer on every object of the kind.
func (t *tick) listUnowned(ctx context.Context, k schema.GroupVersionKind, found map[string]bool) ([]*unstructured.Unstructured, error) {
	want := map[string]bool{}
	for _, d := range t.st.Desired {
		if key := objectKey(d); d.GroupVersionKind().GroupKind() == k.GroupKind() && !found[key] {
			want[key] = true
		}
	}
	lctx, span := startSpan(ctx, "recond.list", kindAttr(k.Kind), attribute.String("k8s.label_selector", ""),
		attribute.Int("recond.missing.count", len(want)))
	items, err := t.r.kube.List(lctx, k, "")
	span.SetAttributes(attribute.Int("recond.objects.count", len(items)))
	var out []*unstructured.Unstructured
	for i := range items {
		if key := objectKey(&items[i]); want[key] {
			u := items[i] // not a pointer into items: the rest is garbage now
			out = append(out, &u)
			delete(want, key)
		}
	}
	span.SetAttributes(attribute.Int("recond.found.count", len(out)))
	endSpan(span, err)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// inventoryKind returns the inventory's entry for gk.
func inventoryKind(inv *inventory.Inventory, gk schema.GroupKind) schema.GroupVersionKind {
	for _, k := range inv.Kinds {
		if k.GroupKind() == gk {
			return k
		}
	}
	return gk.WithVersion("")
}
