package cluster

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestImmutableFields: the API server's own words for a field that cannot
// change, at the end or the start of a cause, never inside one; all only
// when every cause is one.
func TestImmutableFields(t *testing.T) {
	invalid := func(errs ...*field.Error) error {
		return fmt.Errorf("apply: %w", apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "web", errs))
	}
	sel := field.NewPath("spec", "selector")
	for _, tc := range []struct {
		name   string
		err    error
		fields string
		all    bool
	}{
		{"not an API error", errors.New("spec.selector: field is immutable"), "", false},
		{"forbidden, not invalid", apierrors.NewForbidden(schema.GroupResource{Resource: "deployments"}, "web", errors.New("field is immutable")), "", false},
		{"a selector", invalid(field.Invalid(sel, "x", "field is immutable")), "spec.selector", true},
		{"a Secret marked immutable", invalid(field.Forbidden(field.NewPath("data"), "field is immutable when `immutable` is set")), "data", true},
		{"a claim, with a diff below", invalid(field.Forbidden(field.NewPath("spec"), "spec is immutable after creation except resources.requests\n  core.PersistentVolumeClaimSpec{...}")), "spec", true},
		{"one cause of two", invalid(field.Invalid(sel, "x", "field is immutable"), field.Required(field.NewPath("spec", "template"), "")), "spec.selector", false},
		{"quoted inside a webhook's words", invalid(field.Invalid(sel, "x", "denied: a policy says the field is immutable, ask the admins")), "", false},
		{"the same field twice", invalid(field.Invalid(sel, "x", "field is immutable"), field.Invalid(sel, "y", "field is immutable")), "spec.selector", true},
	} {
		fields, all := ImmutableFields(tc.err)
		if strings.Join(fields, ",") != tc.fields || all != tc.all {
			t.Errorf("%s: %v %t, want %q %t", tc.name, fields, all, tc.fields, tc.all)
		}
	}
}
