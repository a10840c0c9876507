package decorate

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"recond.dev/recond/internal/redact"
	"recond.dev/recond/reconcile/diff"
	"recond.dev/recond/reconcile/keys"
)

func configMap(name, value string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "resourceVersion": "7", "uid": "u", "managedFields": []any{}},
		"data":     map[string]any{"v": value},
		"status":   map[string]any{"x": "y"},
	}}
}

// A desired object carries recond's labels and provenance, and none of the
// fields the server owns; a hook carries the hook label instead of the
// ownership ones.
func TestObjectAndHook(t *testing.T) {
	u := configMap("a", "one")
	Object(u, "shop", "abc", "repo#path")
	if l := u.GetLabels(); l[keys.LabelManagedBy] != keys.ManagedByValue || l[keys.LabelInstance] != "shop" {
		t.Errorf("labels %v", l)
	}
	if a := u.GetAnnotations(); a[keys.AnnotationRevision] != "abc" || a[keys.AnnotationSource] != "repo#path" {
		t.Errorf("annotations %v", a)
	}
	if u.GetResourceVersion() != "" || u.GetUID() != "" || u.Object["status"] != nil || u.GetManagedFields() != nil {
		t.Errorf("server fields kept: %v", u.Object)
	}
	h := configMap("h", "one")
	Hook(h, "shop", "abc", "repo#path")
	if l := h.GetLabels(); l[keys.LabelHook] != "shop" || l[keys.LabelInstance] != "" || l[keys.LabelManagedBy] != "" {
		t.Errorf("hook labels %v", l)
	}
}

// A name that holds a decrypted value is refused without quoting it; the
// fields that hold one are marked.
func TestIdentityAndMasked(t *testing.T) {
	u := configMap("app-s3cr3tvalue", "one")
	err := Identity("cm.yaml", u, []string{"s3cr3tvalue"})
	if err == nil || strings.Contains(err.Error(), "s3cr3tvalue") {
		t.Errorf("Identity = %v, want a refusal that does not quote the value", err)
	}
	if err := Identity("cm.yaml", configMap("app", "one"), []string{"s3cr3tvalue"}); err != nil {
		t.Errorf("Identity of a plain name = %v", err)
	}
	held := configMap("b", "s3cr3tvalue")
	Masked(redact.New([]string{"s3cr3tvalue"}), []*unstructured.Unstructured{held, configMap("c", "plain")})
	if held.GetAnnotations()[diff.MaskedFieldsAnnotation] == "" {
		t.Errorf("the field holding a decrypted value is not marked: %v", held.GetAnnotations())
	}
}
