package cluster

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"recond.dev/recond/reconcile/keys"
)

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
		return s + "; " + keys.AnnotationForce + ": recreate " + e.Refused
	}
	return s + "; annotate the object in Git with " + keys.AnnotationForce + ": recreate to have recond delete and create it anew, or delete it by hand"
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

// ImmutableFields returns the fields an API error refuses to change
// because they are immutable ("spec.selector"), and whether that is all it
// refuses (every cause is about an immutable field).
func ImmutableFields(err error) ([]string, bool) {
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
