package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"recond.dev/recond/reconcile/cluster"
	"recond.dev/recond/reconcile/diff"
	"recond.dev/recond/reconcile/writerule"
)

// The engine's side of an update the API server refuses because it
// changes a field that cannot change once set (cluster.ImmutableFields
// tells it from the server's answer): the refusal is named, or, with
// recond.dev/force: recreate (AnnotationForce), the object is deleted and
// created anew within the tick, when the write gate's rules allow.

// ImmutableError is an update the API server refused because it changes
// fields that cannot change once set (cluster.ImmutableError).
type ImmutableError = cluster.ImmutableError

// recreator judges and makes the recreates recond.dev/force: recreate
// asks for.
type recreator struct{ r *Reconciler }

// refusal turns a dry run's refusal of an update into an *ImmutableError
// when it is about immutable fields only; it reports whether
// recond.dev/force: recreate lets the apply recreate the object instead. A
// refusal that is also about anything else stays what it is: a recreate
// would delete the object and then fail to create it.
func (rc recreator) refusal(ctx context.Context, c diff.Change, err error) (error, bool) {
	fields, only := cluster.ImmutableFields(err)
	if c.Action != diff.Update || !only {
		return err, false
	}
	ie := &ImmutableError{Kind: c.Kind, Name: c.Name, Fields: fields, Err: err}
	if c.Desired.GetAnnotations()[AnnotationForce] == "recreate" {
		if why := rc.refused(ctx, c.Live); why != "" {
			ie.Refused = why
			return ie, false
		}
		return nil, true
	}
	return ie, false
}

// refused says why live may not be deleted to be recreated ("": it may),
// by the write gate's own rules (a recreate's delete is admitted by the
// same): never a claim, an object this instance does not own, one marked
// to be kept, nor one whose foreground deletion would take claims with it,
// directly or through any chain of owners.
func (rc recreator) refused(ctx context.Context, live *unstructured.Unstructured) string {
	w := cluster.Write{Purpose: cluster.PurposeRecreate, Verb: cluster.VerbDelete, GVK: live.GroupVersionKind(), Name: live.GetName(), Live: live}
	var ref *writerule.Refusal
	if err := writerule.Check(rc.r.policy(), w); errors.As(err, &ref) {
		if ref.Rule == "claims" {
			return ref.Why
		}
		return "is not applied: " + ref.Why
	}
	if why := takesClaims(ctx, rc.r.kube, live); why != "" {
		return "is not applied: " + why
	}
	return ""
}

var pvcGVK = schema.GroupVersionKind{Version: "v1", Kind: "PersistentVolumeClaim"}

// recreate deletes c's live object (foreground: dependents first; only
// that object, by UID), waits until it is gone, and creates the desired
// one, all within ctx (the tick's deadline).
func (rc recreator) recreate(ctx context.Context, c diff.Change) (*unstructured.Unstructured, error) {
	r := rc.r
	dctx, span := startSpan(ctx, "recond.recreate", kindAttr(c.Kind), attribute.String("k8s.name", c.Name))
	err := r.kube.DeleteForeground(dctx, c.Live)
	if err == nil {
		err = rc.waitDeleted(dctx, c.Live)
	}
	endSpan(span, err)
	if err != nil {
		return nil, fmt.Errorf("recreate %s/%s (%s: recreate): %w", c.Kind, c.Name, AnnotationForce, err)
	}
	r.log.InfoContext(ctx, "deleted to recreate: an immutable field changed", "kind", c.Kind, "name", c.Name)
	return r.kube.ApplyFor(ctx, cluster.Write{Purpose: cluster.PurposeRecreate, Object: c.Desired}, nil)
}

// waitDeleted polls until the object with live's UID no longer exists.
func (rc recreator) waitDeleted(ctx context.Context, live *unstructured.Unstructured) error {
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		got, err := rc.r.kube.Get(ctx, live.GroupVersionKind(), live.GetName())
		if err != nil {
			return err
		}
		if got == nil || got.GetUID() != live.GetUID() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s/%s to be deleted (finalizers %v): %w", live.GetKind(), live.GetName(), got.GetFinalizers(), context.Cause(ctx))
		case <-time.After(wait):
		}
	}
}
