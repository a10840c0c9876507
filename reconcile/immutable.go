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
	"k8s.io/apimachinery/pkg/runtime/schema"

	"recond.dev/recond/reconcile/cluster"
	"recond.dev/recond/reconcile/diff"
	"recond.dev/recond/reconcile/keys"
	"recond.dev/recond/reconcile/writerule"
)

// AnnotationForce "recreate", on an object in Git: a change the API server
// refuses because it touches a field that cannot change once set (a
// Deployment's selector, a Job's template, a Service's clusterIP) is made
// by deleting the object (foreground: its dependents first) and creating
// it anew, within the tick. Never for a PersistentVolumeClaim: its data
// would go with it.
const AnnotationForce = keys.AnnotationForce

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

// How the API server's validation says a field cannot change once set:
// the detail that ends a cause's message (apimachinery's
// ValidateImmutableField and the kinds that word it their own way), or the
// start of a Forbidden one. Matched at the end or the start, never inside:
// a message also quotes the refused value, and a webhook's or a CEL rule's
// words are not the API server's.
var (
	immutableEndings = []string{
		": field is immutable",
		": may not change once set",
	}
	immutableStarts = []string{
		"Forbidden: field is immutable",                                // a ConfigMap or Secret with immutable: true
		"Forbidden: spec is immutable after creation",                  // a PersistentVolumeClaim
		"Forbidden: updates to statefulset spec for fields other than", // a StatefulSet
		"Forbidden: pod updates may not change fields other than",      // a Pod
		"Forbidden: updates to parameters are forbidden",               // a StorageClass-like spec
	}
)

// immutableFields returns the fields an API error refuses to change because
// they are immutable ("spec.selector"), and whether that is all it refuses
// (every cause is about an immutable field).
func immutableFields(err error) ([]string, bool) {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || !apierrors.IsInvalid(err) {
		return nil, false
	}
	details := status.Status().Details
	if details == nil || len(details.Causes) == 0 {
		return nil, false
	}
	var fields []string
	all := true
	for _, c := range details.Causes {
		msg := strings.TrimSpace(c.Message)
		first, _, _ := strings.Cut(msg, "\n") // a PersistentVolumeClaim's adds a diff below
		hit := false
		for _, e := range immutableEndings {
			hit = hit || strings.HasSuffix(first, e)
		}
		for _, p := range immutableStarts {
			hit = hit || strings.HasPrefix(first, p)
		}
		if !hit {
			all = false
			continue
		}
		f := c.Field
		if f == "" {
			f = "(unnamed)"
		}
		if !slices.Contains(fields, f) {
			fields = append(fields, f)
		}
	}
	return fields, all && len(fields) > 0
}

// immutable turns a dry run's refusal of an update into an
// *ImmutableError when it is about immutable fields only; it reports
// whether recond.dev/force: recreate lets the apply recreate the object
// instead. A refusal that is also about anything else stays what it is: a
// recreate would delete the object and then fail to create it.
func (r *Reconciler) immutable(ctx context.Context, c diff.Change, err error) (error, bool) {
	fields, only := immutableFields(err)
	if c.Action != diff.Update || !only {
		return err, false
	}
	ie := &ImmutableError{Kind: c.Kind, Name: c.Name, Fields: fields, Err: err}
	if c.Desired.GetAnnotations()[AnnotationForce] == "recreate" {
		if why := r.mayRecreate(ctx, c.Live); why != "" {
			ie.Refused = why
			return ie, false
		}
		return nil, true
	}
	return ie, false
}

// mayRecreate says why live may not be deleted to be recreated ("": it
// may), by the write gate's own rules (a recreate's delete is admitted by
// the same): never a claim, an object this instance does not own, one
// marked to be kept, nor one whose foreground deletion would take claims
// with it, directly or through any chain of owners.
func (r *Reconciler) mayRecreate(ctx context.Context, live *unstructured.Unstructured) string {
	w := cluster.Write{Purpose: cluster.PurposeRecreate, Verb: cluster.VerbDelete, GVK: live.GroupVersionKind(), Name: live.GetName(), Live: live}
	var ref *writerule.Refusal
	if err := writerule.Check(r.policy(), w); errors.As(err, &ref) {
		if ref.Rule == "claims" {
			return ref.Why
		}
		return "is not applied: " + ref.Why
	}
	if why := takesClaims(ctx, r.kube, live); why != "" {
		return "is not applied: " + why
	}
	return ""
}

var pvcGVK = schema.GroupVersionKind{Version: "v1", Kind: "PersistentVolumeClaim"}

// recreate deletes c's live object (foreground: dependents first; only
// that object, by UID), waits until it is gone, and creates the desired
// one, all within ctx (the tick's deadline).
func (r *Reconciler) recreate(ctx context.Context, c diff.Change) (*unstructured.Unstructured, error) {
	dctx, span := startSpan(ctx, "recond.recreate", kindAttr(c.Kind), attribute.String("k8s.name", c.Name))
	err := r.kube.DeleteForeground(dctx, c.Live)
	if err == nil {
		err = r.waitDeleted(dctx, c.Live)
	}
	endSpan(span, err)
	if err != nil {
		return nil, fmt.Errorf("recreate %s/%s (%s: recreate): %w", c.Kind, c.Name, AnnotationForce, err)
	}
	r.log.InfoContext(ctx, "deleted to recreate: an immutable field changed", "kind", c.Kind, "name", c.Name)
	return r.kube.ApplyFor(ctx, cluster.Write{Purpose: cluster.PurposeRecreate, Object: c.Desired}, nil)
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
