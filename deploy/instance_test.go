package deploy_test

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"recond.dev/recond/reconcile"
)

// checkInstanceName fails unless every recond container's instance name
// (--name: RECOND_NAME from its environment or its ConfigMaps, else
// "recond") is the one whose Lease the Role bound to its ServiceAccount
// names: a flag and a Role that disagree leave recond unable to campaign.
func checkInstanceName(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	byKind := func(kind, ns, name string) *unstructured.Unstructured {
		for _, o := range objs {
			if o.GetKind() == kind && o.GetNamespace() == ns && o.GetName() == name {
				return o
			}
		}
		return nil
	}
	for _, o := range ofKinds(objs, "Deployment") {
		var d appsv1.Deployment
		fromUnstructured(t, o, &d)
		for _, c := range d.Spec.Template.Spec.Containers {
			if c.Name != "recond" {
				continue
			}
			name := "recond"
			for _, e := range c.EnvFrom {
				if e.ConfigMapRef == nil {
					continue
				}
				if cm := byKind("ConfigMap", d.Namespace, e.ConfigMapRef.Name); cm != nil {
					var m corev1.ConfigMap
					fromUnstructured(t, cm, &m)
					if v, ok := m.Data["RECOND_NAME"]; ok {
						name = v
					}
				}
			}
			for _, e := range c.Env {
				if e.Name == "RECOND_NAME" {
					name = e.Value
				}
			}
			for i, a := range c.Args {
				if a == "--name" && i+1 < len(c.Args) {
					name = c.Args[i+1]
				} else if v, ok := strings.CutPrefix(a, "--name="); ok {
					name = v
				}
			}
			lease := reconcile.LeaseName(name)
			var named []string
			for _, rbo := range ofKinds(objs, "RoleBinding") {
				var rb rbacv1.RoleBinding
				fromUnstructured(t, rbo, &rb)
				if rb.Namespace != d.Namespace || !slices.ContainsFunc(rb.Subjects, func(s rbacv1.Subject) bool {
					return s.Kind == "ServiceAccount" && s.Name == d.Spec.Template.Spec.ServiceAccountName
				}) {
					continue
				}
				ro := byKind("Role", rb.Namespace, rb.RoleRef.Name)
				if ro == nil {
					continue
				}
				var role rbacv1.Role
				fromUnstructured(t, ro, &role)
				for _, r := range role.Rules {
					if slices.Contains(r.APIGroups, "coordination.k8s.io") && slices.Contains(r.Resources, "leases") {
						named = append(named, r.ResourceNames...)
					}
				}
			}
			if !slices.Contains(named, lease) {
				t.Errorf("Deployment/%s: recond runs as instance %q (Lease %s), but its Role names the Leases %v", d.Name, name, lease, named)
			}
		}
	}
}
