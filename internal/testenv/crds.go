package testenv

import (
	"context"
	"embed"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// CRDs is the resource of CustomResourceDefinitions.
var CRDs = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// crdFiles are the CustomResourceDefinitions the tests install, one a file.
//
//go:embed testdata/crds/*.yaml
var crdFiles embed.FS

// CRD is the CustomResourceDefinition of testdata/crds/NAME.yaml: widget (a
// Widget of any spec), widget-intorstring (a Widget whose size and port are
// int-or-string), gadget (a Gadget with a status subresource) or sprocket
// (a Sprocket of any content).
func CRD(t testing.TB, name string) *unstructured.Unstructured {
	t.Helper()
	b, err := crdFiles.ReadFile("testdata/crds/" + name + ".yaml")
	if err != nil {
		t.Fatalf("CRD %s: %v", name, err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(b, &u.Object); err != nil {
		t.Fatalf("CRD %s: %v", name, err)
	}
	return u
}

// CRDInGroup is CRD name moved to group: its spec.group, and its name
// PLURAL.GROUP, so that a test has a kind of its own.
func CRDInGroup(t testing.TB, name, group string) *unstructured.Unstructured {
	t.Helper()
	u := CRD(t, name)
	plural, _, _ := unstructured.NestedString(u.Object, "spec", "names", "plural")
	if err := unstructured.SetNestedField(u.Object, group, "spec", "group"); err != nil {
		t.Fatal(err)
	}
	u.SetName(plural + "." + group)
	return u
}

// InstallCRD creates crd (CRD, CRDInGroup) through dyn, waits (30 s at
// most) until the API server serves it (condition Established), deletes it
// when the test ends, and returns its name.
func InstallCRD(t testing.TB, dyn dynamic.Interface, crd *unstructured.Unstructured) string {
	t.Helper()
	ctx := context.Background()
	crds := dyn.Resource(CRDs)
	name := crd.GetName()
	if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create CRD %s: %v", name, err)
	}
	t.Cleanup(func() { _ = crds.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		got, err := crds.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			if c, _ := c.(map[string]any); c["type"] == "Established" && c["status"] == "True" {
				return name
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("CRD %s not established within 30 s: %v", name, conds)
		}
	}
}
