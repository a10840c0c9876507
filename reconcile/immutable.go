package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"recond.dev/recond/reconcile/diff"
)

// AnnotationForce "recreate", on an object in Git: a change the API server
// refuses because it touches a field that cannot change once set (a
// Deployment's selector, a Job's template, a Service's clusterIP) is made
// by deleting the object (foreground: its dependents first) and creating
// it anew, within the tick. Never for a PersistentVolumeClaim: its data
// would go with it.
const AnnotationForce = "recond.dev/force"

// neverRecreated are the kinds recond.dev/force: recreate never deletes.
var neverRecreated = []string{"PersistentVolumeClaim"}

// ImmutableError is an update the API server refused because it changes
// fields that cannot change once set: the object and the fields, from the
// server's answer.
type ImmutableError struct {
	Kind, Name string
	Fields     []string
	// Refused says why recond.dev/force: recreate does not apply, when it
	// was asked for.
	Refused string
	Err     error
}

func (e *ImmutableError) Error() string {
	s := fmt.Sprintf("%s/%s: immutable field %s: the API server refuses to change it in place", e.Kind, e.Name, strings.Join(e.Fields, ", "))
	if e.Refused != "" {
		return s + "; " + AnnotationForce + ": recreate " + e.Refused
	}
	return s + "; annotate the object in Git with " + AnnotationForce + ": recreate to have recond delete and create it anew, or delete it by hand"
}

func (e *ImmutableError) Unwrap() error { return e.Err }

// immutablePhrases are how the API server's validation says a field cannot
// change once set (apimachinery's ValidateImmutableField, and the kinds
// that word it their own way).
var immutablePhrases = []string{
	"field is immutable",
	"may not change once set",
	"is immutable after creation",
	"updates to statefulset spec for fields other than",
	"cannot be changed",
}

// immutableFields returns the fields an API error refuses to change because
// they are immutable ("spec.selector"), none for any other error.
func immutableFields(err error) []string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || !apierrors.IsInvalid(err) {
		return nil
	}
	var fields []string
	details := status.Status().Details
	if details == nil {
		return nil
	}
	for _, c := range details.Causes {
		msg := strings.ToLower(c.Message)
		for _, p := range immutablePhrases {
			if strings.Contains(msg, p) {
				f := c.Field
				if f == "" {
					f = "(unnamed)"
				}
				if !slices.Contains(fields, f) {
					fields = append(fields, f)
				}
				break
			}
		}
	}
	return fields
}

// immutable turns a dry run's refusal of an update into an
// *ImmutableError when it is about immutable fields; it reports whether
// recond.dev/force: recreate lets the apply recreate the object instead.
func immutable(c diff.Change, err error) (error, bool) {
	fields := immutableFields(err)
	if c.Action != diff.Update || len(fields) == 0 {
		return err, false
	}
	ie := &ImmutableError{Kind: c.Kind, Name: c.Name, Fields: fields, Err: err}
	if c.Desired.GetAnnotations()[AnnotationForce] == "recreate" {
		if !slices.Contains(neverRecreated, c.Kind) {
			return nil, true
		}
		ie.Refused = "is never applied to a " + c.Kind + " (its data would be lost)"
	}
	return ie, false
}

// recreate deletes c's live object (foreground: dependents first; only
// that object, by UID), waits until it is gone, and creates the desired
// one, all within ctx (the tick's deadline).
func (r *Reconciler) recreate(ctx context.Context, c diff.Change) (*unstructured.Unstructured, error) {
	gvk := c.Live.GroupVersionKind()
	dctx, span := startSpan(ctx, "recond.recreate", kindAttr(c.Kind), attribute.String("k8s.name", c.Name))
	err := r.kube.DeleteForeground(dctx, gvk, c.Name, c.Live.GetUID())
	if err == nil {
		err = r.waitDeleted(dctx, c.Live)
	}
	endSpan(span, err)
	if err != nil {
		return nil, fmt.Errorf("recreate %s/%s (%s: recreate): %w", c.Kind, c.Name, AnnotationForce, err)
	}
	r.log.InfoContext(ctx, "deleted to recreate: an immutable field changed", "kind", c.Kind, "name", c.Name)
	return r.kube.Apply(ctx, c.Desired, false)
}

// waitDeleted polls until the object with live's UID no longer exists.
func (r *Reconciler) waitDeleted(ctx context.Context, live *unstructured.Unstructured) error {
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		got, err := r.kube.Get(ctx, live.GroupVersionKind(), live.GetName())
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
