package inventory

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	kvalidation "k8s.io/apimachinery/pkg/util/validation"

	"recond.dev/recond/reconcile/keys"
)

// The seed corpora live in testdata/fuzz/<target>/.

func inventoryConfigMap(kinds, revision any) string {
	b, err := utiljson.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "recond-inventory-recond", "labels": map[string]any{keys.LabelInventory: "recond"}},
		"data":     map[string]any{"kinds": kinds, "revision": revision},
	})
	if err != nil {
		panic(err)
	}
	return string(b)
}

// FuzzParseInventory reads any ConfigMap (JSON) as an inventory: it never
// panics, is deterministic, either fails with no inventory or reads every
// non-blank line of data.kinds as one kind, and what it reads, written back
// the way the engine writes it, reads back the same.
func FuzzParseInventory(f *testing.F) {
	const rev = "3f2a9c1e5b7d4a6f8e0c2b4d6f8a0c2e4b6d8f0a"
	for _, s := range []string{
		inventoryConfigMap("apps/v1 Deployment\nv1 ConfigMap\nv1 Service", rev),
		inventoryConfigMap("v1 ConfigMap\npolicy/v1 PodDisruptionBudget\nnetworking.k8s.io/v1 Ingress\nexample.com/v1alpha1 Widget\n", rev),
		inventoryConfigMap("", ""),
		inventoryConfigMap("  v1 ConfigMap  \n\n\tapps/v1 Deployment\r\n", rev),
		inventoryConfigMap("v1 ConfigMap\nnot-a-kind-line", rev),
		inventoryConfigMap("apps/v1/x Deployment", rev),
		inventoryConfigMap("v1 Config Map", rev),
		inventoryConfigMap("apps/ Deployment", rev),
		inventoryConfigMap("/v1 ConfigMap", rev),
		inventoryConfigMap(3, rev),
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"recond-inventory-recond"}}`,
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"recond-inventory-recond"},"data":null}`,
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"recond-inventory-recond"},"data":["v1 ConfigMap"]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, cmJSON []byte) {
		var obj map[string]any
		if utiljson.Unmarshal(cmJSON, &obj) != nil || obj == nil {
			return
		}
		cm := &unstructured.Unstructured{Object: obj}
		inv, err := Parse(cm)
		again, err2 := Parse(cm.DeepCopy())
		if (err == nil) != (err2 == nil) || !reflect.DeepEqual(inv, again) {
			t.Fatalf("Parse is not deterministic: %+v %v, then %+v %v", inv, err, again, err2)
		}
		if err != nil {
			if inv != nil {
				t.Fatalf("error %v with an inventory %+v", err, inv)
			}
			return
		}
		data, _, _ := unstructured.NestedStringMap(obj, "data")
		lines := 0
		for _, l := range strings.Split(data["kinds"], "\n") {
			if strings.TrimSpace(l) != "" {
				lines++
			}
		}
		if len(inv.Kinds) != lines || inv.Revision != data["revision"] {
			t.Fatalf("read %d kinds and revision %q from %d lines and revision %q", len(inv.Kinds), inv.Revision, lines, data["revision"])
		}
		for _, k := range inv.Kinds {
			if k.Version == "" || k.Kind == "" {
				t.Fatalf("kind %#v without a version or a kind", k)
			}
		}
		written := &unstructured.Unstructured{Object: map[string]any{
			"data": inv.Data(),
		}}
		back, err := Parse(written)
		if err != nil {
			t.Fatalf("inventory %+v written as %q does not read back: %v", inv, inv.Data(), err)
		}
		if !back.Equal(inv) {
			t.Fatalf("inventory %+v reads back as %+v", inv, back)
		}
	})
}

// FuzzWriteInventory writes an inventory of any kinds an API server could
// serve, as the engine does, and reads it back: the same kinds, in the
// same order, and the same revision.
func FuzzWriteInventory(f *testing.F) {
	f.Add("apps", "v1", "Deployment", "", "v1", "ConfigMap", "3f2a9c1e5b7d4a6f8e0c2b4d6f8a0c2e4b6d8f0a")
	f.Add("example.com", "v1alpha1", "Widget", "networking.k8s.io", "v1", "Ingress", "")
	f.Add("", "v1", "Service", "", "v1", "Service", "main")
	f.Add("policy", "v1", "PodDisruptionBudget", "batch", "v1", "CronJob", "0000000000000000000000000000000000000000")
	f.Add("a.b.c", "v2beta3", "X", "rbac.authorization.k8s.io", "v1", "RoleBinding", "r")
	f.Fuzz(func(t *testing.T, g1, v1, k1, g2, v2, k2, revision string) {
		var kinds []schema.GroupVersionKind
		for _, k := range []schema.GroupVersionKind{{Group: g1, Version: v1, Kind: k1}, {Group: g2, Version: v2, Kind: k2}} {
			if !servable(k) {
				return
			}
			kinds = append(kinds, k)
		}
		inv := &Inventory{Revision: revision}
		for _, k := range kinds {
			inv.Add(k)
		}
		written := &unstructured.Unstructured{Object: map[string]any{
			"data": inv.Data(),
		}}
		back, err := Parse(written)
		if err != nil {
			t.Fatalf("inventory %+v does not read back: %v", inv, err)
		}
		if !back.Equal(inv) {
			t.Fatalf("inventory %+v reads back as %+v", inv, back)
		}
	})
}

// servable reports whether an API server could serve kind k: a DNS
// subdomain (or no) group, a DNS label version and a kind whose lower case
// is a DNS-1035 label, as for a custom resource.
func servable(k schema.GroupVersionKind) bool {
	return (k.Group == "" || len(kvalidation.IsDNS1123Subdomain(k.Group)) == 0) &&
		len(kvalidation.IsDNS1123Label(k.Version)) == 0 &&
		len(kvalidation.IsDNS1035Label(strings.ToLower(k.Kind))) == 0
}
