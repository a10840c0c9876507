package testenv

import (
	"io/fs"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestCRDs reads every CRD of testdata/crds: named PLURAL.GROUP, as the API
// server requires, also once moved to another group.
func TestCRDs(t *testing.T) {
	files, err := fs.Glob(crdFiles, "testdata/crds/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs (%v)", err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(strings.TrimPrefix(f, "testdata/crds/"), ".yaml")
		for _, crd := range []*unstructured.Unstructured{CRD(t, name), CRDInGroup(t, name, "moved.recond.dev")} {
			group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
			plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
			if crd.GetKind() != "CustomResourceDefinition" || group == "" || plural == "" || crd.GetName() != plural+"."+group {
				t.Errorf("%s: %s %s, group %q, plural %q", name, crd.GetKind(), crd.GetName(), group, plural)
			}
		}
	}
}
