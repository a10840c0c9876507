package reconcile

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"recond.dev/recond/reconcile/source"
)

// keptGenerated reports whether the generated-once field at path of the
// live object l is kept as it is (keepGenerated): unless the field is now
// made from other ordinary inputs than when l was written (the desired
// object d and l record different fingerprints for it,
// source.AnnotationGeneratedInputs), when the render's value is written.
func keptGenerated(d, l *unstructured.Unstructured, path []string) bool {
	return !source.GeneratedInputsChanged(d.GetAnnotations(), l.GetAnnotations(), path)
}
