package watch

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func mustYAML(t *testing.T, s string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(s), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

func TestTransform(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{
			name: "other managers cut to stubs, recond whole (its field set as text), last-applied dropped, status kept",
			in: `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: '{"big":"copy"}'
    keep: me
  managedFields:
  - {manager: recond, operation: Apply, apiVersion: apps/v1, time: "2026-01-01T00:00:00Z", fieldsType: FieldsV1, fieldsV1: {f:spec: {f:replicas: {}}}}
  - {manager: kubectl, operation: Update, apiVersion: apps/v1, time: "2026-01-01T00:00:01Z", fieldsType: FieldsV1, fieldsV1: {f:metadata: {f:annotations: {}}}}
  - {manager: kube-controller-manager, operation: Update, apiVersion: apps/v1, time: "2026-01-01T00:00:02Z", subresource: status, fieldsType: FieldsV1, fieldsV1: {f:status: {f:replicas: {}}}}
spec: {replicas: 2}
status: {replicas: 2}
`,
			want: `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  annotations: {keep: me}
  managedFields:
  - {manager: recond, operation: Apply, apiVersion: apps/v1, time: "2026-01-01T00:00:00Z", fieldsType: FieldsV1, fieldsV1: '{"f:spec":{"f:replicas":{}}}'}
  - {manager: kubectl, operation: Update, apiVersion: apps/v1, time: "2026-01-01T00:00:01Z"}
  - {manager: kube-controller-manager, operation: Update, apiVersion: apps/v1, time: "2026-01-01T00:00:02Z", subresource: status}
spec: {replicas: 2}
status: {replicas: 2}
`,
		},
		{
			name: "annotations that held only last-applied go",
			in: `
apiVersion: v1
kind: ConfigMap
metadata:
  name: c
  annotations: {kubectl.kubernetes.io/last-applied-configuration: x}
`,
			want: `
apiVersion: v1
kind: ConfigMap
metadata: {name: c}
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := transform("recond")(mustYAML(t, tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(mustYAML(t, tt.want).Object, got.(*unstructured.Unstructured).Object); d != "" {
				t.Errorf("transform (-want +got):\n%s", d)
			}
		})
	}
}

func TestClassifyUpdate(t *testing.T) {
	obj := func(fields string) *unstructured.Unstructured {
		return mustYAML(t, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  managedFields:\n"+fields)
	}
	const (
		recond0  = "  - {manager: recond, operation: Apply, time: '2026-01-01T00:00:00Z', fieldsType: FieldsV1, fieldsV1: {f:data: {f:a: {}}}}\n"
		recond1  = "  - {manager: recond, operation: Apply, time: '2026-01-01T00:00:05Z', fieldsType: FieldsV1, fieldsV1: {f:data: {f:a: {}, f:b: {}}}}\n"
		kubectl0 = "  - {manager: kubectl, operation: Update, time: '2026-01-01T00:00:01Z'}\n"
		kubectl1 = "  - {manager: kubectl, operation: Update, time: '2026-01-01T00:00:06Z'}\n"
		kcm      = "  - {manager: kube-controller-manager, operation: Update, subresource: status, time: '2026-01-01T00:00:07Z'}\n"
	)
	tests := []struct {
		name         string
		old, new     string
		own          bool
		manager, sub string
	}{
		{name: "recond's apply alone", old: recond0 + kubectl0, new: recond1 + kubectl0, own: true},
		{name: "recond's forced apply takes kubectl's fields", old: recond0 + kubectl0, new: recond1, own: true},
		{name: "kubectl advances", old: recond0 + kubectl0, new: recond0 + kubectl1, manager: "kubectl"},
		{name: "kubectl appears", old: recond0, new: recond0 + kubectl1, manager: "kubectl"},
		{name: "both move: not own", old: recond0 + kubectl0, new: recond1 + kubectl1, manager: "kubectl"},
		{name: "status by a controller", old: recond0, new: recond0 + kcm, manager: "kube-controller-manager", sub: "status"},
		{name: "newest of two others", old: recond0, new: recond0 + kubectl1 + kcm, manager: "kube-controller-manager", sub: "status"},
		{name: "no entry moved: unknown, not own", old: recond0 + kubectl0, new: recond0 + kubectl0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			own, mgr, sub := classifyUpdate(obj(tt.old), obj(tt.new), "recond")
			if d := cmp.Diff([]any{tt.own, tt.manager, tt.sub}, []any{own, mgr, sub}); d != "" {
				t.Errorf("classifyUpdate (-want +got):\n%s", d)
			}
		})
	}
}
