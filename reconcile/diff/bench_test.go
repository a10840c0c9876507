package diff

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// BenchmarkObjects diffs N Deployments that are unchanged against their live
// form (server defaults, status, managedFields): the work of a converged tick.
//
//	go test -run '^$' -bench Objects -benchmem ./reconcile/diff/
func BenchmarkObjects(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("deployments=%d", n), func(b *testing.B) {
			d0 := desiredObj(b, fixture(b, "deployment.yaml"))
			l0 := liveObj(b, fixture(b, "deployment-live.yaml"))
			desired := make([]*unstructured.Unstructured, n)
			live := make([]*unstructured.Unstructured, n)
			for i := range n {
				desired[i], live[i] = d0.DeepCopy(), l0.DeepCopy()
				name := fmt.Sprintf("web-%d", i)
				desired[i].SetName(name)
				live[i].SetName(name)
			}
			opts := Options{Manager: "recond", IgnoreAnnotations: []string{"recond.dev/revision"}}
			for b.Loop() {
				for _, c := range Objects(desired, live, opts) {
					if c.Action != Unchanged {
						b.Fatalf("%s", c)
					}
				}
			}
		})
	}
}
