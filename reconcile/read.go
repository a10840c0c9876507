package reconcile

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"recond.dev/recond/reconcile/source"
)

// read fetches the revision, renders the manifests and checks that every
// object belongs to recond's namespace. Nothing is decided about the cluster
// here except each kind's scope. A revision is rendered once: while it does
// not move, later ticks reuse its decorated desired set.
func (r *Reconciler) read(ctx context.Context, st *State) error {
	fctx, span := startSpan(ctx, "recond.git.fetch", attribute.String("recond.source", r.src.DisplayURL()))
	rev, err := r.src.Fetch(fctx)
	span.SetAttributes(attribute.String("recond.revision", rev.SHA), attribute.Bool("recond.fetched", rev.Fetched))
	endSpan(span, err)
	if err != nil {
		return err
	}
	st.Revision, st.Fetched = rev.SHA, rev.Fetched
	if cached := r.renderOf(rev.SHA); cached != nil {
		// The revision did not move: its render is reused, rendering being a
		// function of the commit alone. Only the kinds' scope, which the
		// server decides, is checked again.
		trace.SpanFromContext(ctx).SetAttributes(attribute.Bool("recond.render.cached", true))
		if err := r.checkScopes(cached); err != nil {
			return err
		}
		st.Desired = cached
		st.Counts.Desired = len(st.Desired)
		return nil
	}
	trace.SpanFromContext(ctx).SetAttributes(attribute.Bool("recond.render.cached", false))
	rctx, span := startSpan(ctx, "recond.render", attribute.String("recond.path", r.cfg.Path))
	manifests, err := r.src.Render(rctx, rev.SHA)
	span.SetAttributes(attribute.Int("recond.objects.count", len(manifests)))
	endSpan(span, err)
	if errors.Is(err, source.ErrRenderKilled) && errors.Is(err, context.DeadlineExceeded) {
		// The render outlived its tick: its worker was killed, which is
		// what abandoning a phase would have done (recond_loop_stalls_total).
		return fmt.Errorf("%w: %w", errAbandoned, err)
	}
	if err != nil {
		return err
	}
	sourceAnn := r.src.DisplayURL() + "#" + r.cfg.Path
	seen := map[string]string{} // group/kind/name -> file
	desired := make([]*unstructured.Unstructured, 0, len(manifests))
	for _, m := range manifests {
		obj := m.Object
		gvk := obj.GroupVersionKind()
		id := fmt.Sprintf("%s/%s", gvk.Kind, obj.GetName())
		if p := reservedName(obj.GetName()); p != "" {
			return Invalidf("%s: %s: names starting with %q are recond's own (its inventory and its Lease); rename the object", m.File, id, p)
		}
		mapping, err := r.kube.Mapping(gvk)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", m.File, id, err)
		}
		if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
			return Invalidf("%s: %s: %s is cluster-scoped; recond manages only namespace %q", m.File, id, gvk.Kind, r.cfg.Namespace)
		}
		switch ns := obj.GetNamespace(); ns {
		case "":
			obj.SetNamespace(r.cfg.Namespace)
		case r.cfg.Namespace:
		default:
			return Invalidf("%s: %s: namespace %q is not recond's namespace %q", m.File, id, ns, r.cfg.Namespace)
		}
		key := gvk.GroupKind().String() + "/" + obj.GetName()
		if first, dup := seen[key]; dup {
			return Invalidf("%s: %s: duplicate object (first defined in %s)", m.File, id, first)
		}
		seen[key] = m.File
		decorate(obj, r.cfg.Name, st.Revision, sourceAnn)
		desired = append(desired, obj)
	}
	st.Desired = desired
	st.Counts.Desired = len(desired)
	// Only a render that passed every check is kept; the phases after read
	// never modify a desired object, so the next tick at this revision can
	// hand out the same ones.
	r.mu.Lock()
	r.rendered = renderCache{sha: rev.SHA, desired: desired}
	r.mu.Unlock()
	return nil
}

// renderOf is the kept render of sha, or nil.
func (r *Reconciler) renderOf(sha string) []*unstructured.Unstructured {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rendered.sha == "" || r.rendered.sha != sha {
		return nil
	}
	return r.rendered.desired
}

// checkScopes checks that every kind of a reused render is still
// namespace-scoped (a CRD can be replaced by a cluster-scoped one).
func (r *Reconciler) checkScopes(desired []*unstructured.Unstructured) error {
	seen := map[schema.GroupVersionKind]bool{}
	for _, d := range desired {
		gvk := d.GroupVersionKind()
		if seen[gvk] {
			continue
		}
		seen[gvk] = true
		mapping, err := r.kube.Mapping(gvk)
		if err != nil {
			return fmt.Errorf("%s/%s: %w", gvk.Kind, d.GetName(), err)
		}
		if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
			return Invalidf("%s/%s: %s is cluster-scoped; recond manages only namespace %q", gvk.Kind, d.GetName(), gvk.Kind, r.cfg.Namespace)
		}
	}
	return nil
}

// decorate adds the ownership labels and the provenance annotations.
func decorate(obj *unstructured.Unstructured, instance, revision, source string) {
	l := obj.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	l[LabelManagedBy] = ManagedByValue
	l[LabelInstance] = instance
	obj.SetLabels(l)
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[AnnotationRevision] = revision
	a[AnnotationSource] = source
	obj.SetAnnotations(a)
	// Fields the server owns must never be applied.
	for _, f := range []string{"resourceVersion", "uid", "creationTimestamp", "generation", "managedFields", "selfLink"} {
		unstructured.RemoveNestedField(obj.Object, "metadata", f)
	}
	unstructured.RemoveNestedField(obj.Object, "status")
}
