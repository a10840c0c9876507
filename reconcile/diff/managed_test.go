package diff

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// ManagedFields reads what GetManagedFields reads, and a field set held as
// JSON text (CompactFieldsV1) as the same entry.
func TestManagedFields(t *testing.T) {
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(`
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  managedFields:
  - manager: recond
    operation: Apply
    apiVersion: apps/v1
    time: "2026-01-01T00:00:00Z"
    fieldsType: FieldsV1
    fieldsV1: {f:spec: {f:replicas: {}, f:template: {f:spec: {f:containers: {'k:{"name":"web"}': {.: {}, f:image: {}}}}}}}
  - manager: kube-controller-manager
    operation: Update
    apiVersion: apps/v1
    time: "2026-01-01T00:00:02Z"
    subresource: status
    fieldsType: FieldsV1
    fieldsV1: {f:status: {f:replicas: {}}}
`), &u.Object); err != nil {
		t.Fatal(err)
	}
	want := u.GetManagedFields()
	if len(want) != 2 {
		t.Fatalf("GetManagedFields: %d entries", len(want))
	}
	if diff := cmp.Diff(want, ManagedFields(u)); diff != "" {
		t.Errorf("decoded (-GetManagedFields +ManagedFields):\n%s", diff)
	}
	before := owned(u, "recond")
	for _, e := range u.Object["metadata"].(map[string]any)["managedFields"].([]any) {
		CompactFieldsV1(e.(map[string]any))
	}
	if _, ok := u.Object["metadata"].(map[string]any)["managedFields"].([]any)[0].(map[string]any)["fieldsV1"].(string); !ok {
		t.Fatal("CompactFieldsV1 left the field set decoded")
	}
	if diff := cmp.Diff(want, ManagedFields(u)); diff != "" {
		t.Errorf("compacted (-GetManagedFields before +ManagedFields after):\n%s", diff)
	}
	after := owned(u, "recond")
	if before == nil || after == nil || !before.Equals(after) {
		t.Errorf("owned fields: %v before compacting, %v after", before, after)
	}
}
