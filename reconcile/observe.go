package reconcile

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// observe lists, once per kind, the objects this instance owns: every kind
// Git names and every kind the inventory says it has applied. A desired
// object not found that way gets one GET (it may exist, unowned).
func (r *Reconciler) observe(ctx context.Context, st *State) error {
	inv, err := r.loadInventory(ctx)
	if err != nil {
		return err
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
	selector := ownerSelector(r.cfg.Name)
	found := map[string]bool{}
	var live []*unstructured.Unstructured
	for _, k := range kinds {
		lctx, span := startSpan(ctx, "recond.list", kindAttr(k.Kind), attribute.String("k8s.label_selector", selector))
		items, err := r.kube.List(lctx, k, selector)
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
		u, err := r.kube.Get(gctx, d.GroupVersionKind(), d.GetName())
		endSpan(span, err)
		if err != nil {
			return err
		}
		if u != nil {
			live[i] = u
		}
	}
	for _, d := range st.Desired {
		if found[objectKey(d)] {
			continue
		}
		gctx, span := startSpan(ctx, "recond.get", kindAttr(d.GetKind()), attribute.String("k8s.name", d.GetName()))
		u, err := r.kube.Get(gctx, d.GroupVersionKind(), d.GetName())
		span.SetAttributes(attribute.Bool("recond.found", u != nil))
		endSpan(span, err)
		if err != nil {
			return err
		}
		if u != nil {
			live = append(live, u)
		}
	}
	st.Live = live
	return nil
}

func (st *State) desiresKind(k schema.GroupVersionKind) bool {
	for _, d := range st.Desired {
		if d.GroupVersionKind().GroupKind() == k.GroupKind() {
			return true
		}
	}
	return false
}

// objectKey identifies an object within the namespace across API versions.
func objectKey(u *unstructured.Unstructured) string {
	return fmt.Sprintf("%s/%s", u.GroupVersionKind().GroupKind().String(), u.GetName())
}

// inventoryKind returns the inventory's entry for gk.
func inventoryKind(inv *inventory, gk schema.GroupKind) schema.GroupVersionKind {
	for _, k := range inv.Kinds {
		if k.GroupKind() == gk {
			return k
		}
	}
	return gk.WithVersion("")
}
