package deploy_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"

	"recond.dev/recond/deploy"
)

// The kustomizations docs/deploy.md promises. Kustomizations finds them (and
// any added later); a missing one fails TestEveryKustomizationApplies.
var wantKustomizations = []string{
	"base",
	"examples/more-kinds",
	"examples/sidecar",
	"examples/two-tenants",
	"examples/two-tenants/tenant-a",
	"examples/two-tenants/tenant-b",
	"monitoring",
}

func kustomizations(t testing.TB) []string {
	t.Helper()
	dirs, err := deploy.Kustomizations(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range wantKustomizations {
		if !slices.Contains(dirs, want) {
			t.Errorf("no kustomization %s below deploy/ (found %v)", want, dirs)
		}
	}
	return dirs
}

// Every kustomization below deploy/ renders, its references resolve within
// it, and the API server accepts every object with a server-side dry run
// (schema validation, defaulting, admission), the monitoring objects against
// the CRDs controller-gen generated from the Prometheus Operator's types.
func TestEveryKustomizationApplies(t *testing.T) {
	cp.Require(t)
	for _, dir := range kustomizations(t) {
		t.Run(strings.TrimSuffix(deploy.OutputName(dir), ".yaml"), func(t *testing.T) {
			r := render(t, dir)
			checkReferences(t, r.Objects)
			for _, o := range r.Objects {
				if o.GroupVersionKind().Group == "monitoring.coreos.com" {
					installMonitoringCRDs(t)
					break
				}
			}
			// The kustomization's own namespaces must exist for the objects
			// in them to be admitted; the rest go to a fresh namespace, as
			// with kubectl apply -n.
			for _, n := range ofKinds(r.Objects, "Namespace") {
				ensureNamespace(t, n.GetName())
			}
			ns := cp.Namespace(t)
			k := newKube(t, cp.Config)
			if err := k.apply(r.Objects, ns, true); err != nil {
				t.Fatal(err)
			}
			// A dry run stores nothing.
			for _, o := range r.Objects {
				if o.GetKind() == "Namespace" {
					continue
				}
				o = o.DeepCopy()
				ri, err := k.resource(o, ns)
				if err != nil {
					t.Fatal(err)
				}
				_, err = ri.Get(context.Background(), o.GetName(), metav1.GetOptions{})
				if !apierrors.IsNotFound(err) {
					t.Errorf("%s %s/%s exists after a dry run (err %v)", o.GetKind(), o.GetNamespace(), o.GetName(), err)
				}
			}
			t.Logf("%d objects admitted with DryRun: All", len(r.Objects))
		})
	}
}

// checkReferences fails unless every name a rendered workload or binding
// refers to is an object of the same rendering (kustomize's hashed
// ConfigMap names included), except optional references and what the API
// server provides.
func checkReferences(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	has := func(kind, ns, name string) bool {
		for _, o := range objs {
			if o.GetKind() == kind && o.GetNamespace() == ns && o.GetName() == name {
				return true
			}
		}
		return false
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "Deployment":
			var d appsv1.Deployment
			fromUnstructured(t, o, &d)
			ns, spec := d.Namespace, d.Spec.Template.Spec
			if sa := spec.ServiceAccountName; sa != "" && !has("ServiceAccount", ns, sa) {
				t.Errorf("Deployment/%s runs as ServiceAccount %s, which is not rendered with it", d.Name, sa)
			}
			if !labels.SelectorFromSet(d.Spec.Selector.MatchLabels).Matches(labels.Set(d.Spec.Template.Labels)) {
				t.Errorf("Deployment/%s: selector %v does not select its pod template's labels %v", d.Name, d.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
			}
			for _, c := range spec.Containers {
				for _, e := range c.EnvFrom {
					if ref := e.ConfigMapRef; ref != nil && (ref.Optional == nil || !*ref.Optional) && !has("ConfigMap", ns, ref.Name) {
						t.Errorf("Deployment/%s container %s: envFrom ConfigMap %s is not rendered with it", d.Name, c.Name, ref.Name)
					}
				}
			}
			for _, v := range spec.Volumes {
				if s := v.Secret; s != nil && (s.Optional == nil || !*s.Optional) && !has("Secret", ns, s.SecretName) {
					t.Errorf("Deployment/%s volume %s: Secret %s is neither optional nor rendered", d.Name, v.Name, s.SecretName)
				}
				if p := v.Projected; p != nil {
					for _, src := range p.Sources {
						// kube-root-ca.crt is published in every namespace.
						if c := src.ConfigMap; c != nil && c.Name != "kube-root-ca.crt" && !has("ConfigMap", ns, c.Name) {
							t.Errorf("Deployment/%s volume %s: ConfigMap %s is not rendered", d.Name, v.Name, c.Name)
						}
					}
				}
			}
		case "RoleBinding":
			var rb rbacv1.RoleBinding
			fromUnstructured(t, o, &rb)
			if rb.RoleRef.Kind != "Role" || !has("Role", rb.Namespace, rb.RoleRef.Name) {
				t.Errorf("RoleBinding/%s: roleRef %s/%s is not a Role rendered with it", rb.Name, rb.RoleRef.Kind, rb.RoleRef.Name)
			}
			for _, s := range rb.Subjects {
				if s.Kind != "ServiceAccount" {
					t.Errorf("RoleBinding/%s binds %s %s, want only ServiceAccounts", rb.Name, s.Kind, s.Name)
					continue
				}
				if s.Namespace != "" && s.Namespace != rb.Namespace {
					t.Errorf("RoleBinding/%s (namespace %q) binds a ServiceAccount of namespace %q", rb.Name, rb.Namespace, s.Namespace)
				}
				if !has("ServiceAccount", rb.Namespace, s.Name) {
					t.Errorf("RoleBinding/%s binds ServiceAccount %s, which is not rendered with it", rb.Name, s.Name)
				}
			}
		case "ClusterRole", "ClusterRoleBinding":
			t.Errorf("%s/%s: recond needs no cluster-wide permission", o.GetKind(), o.GetName())
		}
	}
	checkInstanceName(t, objs)
}

func fromUnstructured(t testing.TB, u *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
		t.Fatalf("%s/%s: %v", u.GetKind(), u.GetName(), err)
	}
}

var (
	crdsOnce sync.Once
	crdsErr  error
)

// monitoringCRDs holds the Prometheus Operator's CRDs, which `make crds`
// generates.
const monitoringCRDs = "testdata/monitoring-crds"

// installMonitoringCRDs installs, once, the CRDs of monitoringCRDs and
// waits until the API server serves them.
func installMonitoringCRDs(t testing.TB) {
	t.Helper()
	dir := monitoringCRDs
	crdsOnce.Do(func() { crdsErr = installCRDs(t, dir) })
	if crdsErr != nil {
		t.Fatal(crdsErr)
	}
}

func installCRDs(t testing.TB, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return err
	}
	var crds []*unstructured.Unstructured
	for _, f := range files {
		objs, err := decodeFile(f)
		if err != nil {
			return err
		}
		crds = append(crds, objs...)
	}
	var kinds []string
	for _, c := range crds {
		kind, _, _ := unstructured.NestedString(c.Object, "spec", "names", "kind")
		kinds = append(kinds, kind)
	}
	for _, want := range []string{"ServiceMonitor", "PodMonitor", "PrometheusRule"} {
		if !slices.Contains(kinds, want) {
			return errors.New(dir + " has no CRD of kind " + want + " (found " + strings.Join(kinds, ", ") + "): run make crds")
		}
	}
	if err := newKube(t, cp.Config).apply(crds, "", false); err != nil {
		return err
	}
	gvr := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	client := dynamic.NewForConfigOrDie(cp.Config).Resource(gvr)
	for _, c := range crds {
		err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			live, err := client.Get(ctx, c.GetName(), metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			conds, _, _ := unstructured.NestedSlice(live.Object, "status", "conditions")
			for _, cond := range conds {
				m, _ := cond.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return errors.New("CRD " + c.GetName() + " not Established: " + err.Error())
		}
	}
	t.Logf("installed %d CRDs from %s: %v", len(crds), dir, kinds)
	return nil
}

// decodeFile reads every object of a multi-document YAML file.
func decodeFile(path string) ([]*unstructured.Unstructured, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return decodeYAML(b)
}

func decodeYAML(b []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if m != nil {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
}

// recondContainers returns, for every rendered Deployment with a container
// named recond, the Deployment and that container.
func recondContainers(t testing.TB, objs []*unstructured.Unstructured) map[*appsv1.Deployment]corev1.Container {
	t.Helper()
	out := map[*appsv1.Deployment]corev1.Container{}
	for _, o := range ofKinds(objs, "Deployment") {
		d := &appsv1.Deployment{}
		fromUnstructured(t, o, d)
		for _, c := range d.Spec.Template.Spec.Containers {
			if c.Name == "recond" {
				out[d] = c
			}
		}
	}
	return out
}

// Every recond container, as a Deployment (base, tenants) or a sidecar, runs
// hardened and as documented: non-root UID 65532, read-only root file
// system, no privilege escalation, no capabilities, RuntimeDefault seccomp,
// resources set, /healthz liveness, its namespace and pod name from the
// downward API, settings from the ConfigMap recond, OTLP settings from the
// optional ConfigMap recond-otel, Git credentials from the optional Secret
// recond-git, the age keys from the optional Secret recond-sops, a writable
// /tmp, and an API token.
func TestRecondContainersAreHardened(t *testing.T) {
	for _, dir := range kustomizations(t) {
		found := recondContainers(t, render(t, dir).Objects)
		if dir != "base/rbac" && dir != "monitoring" && len(found) == 0 {
			t.Errorf("%s: no recond container", dir)
		}
		for d, c := range found {
			where := dir + ": Deployment/" + d.Name
			pod := d.Spec.Template.Spec
			psc := pod.SecurityContext
			if psc == nil {
				psc = &corev1.PodSecurityContext{}
			}
			sc := c.SecurityContext
			if sc == nil {
				t.Errorf("%s: recond container without securityContext", where)
				continue
			}
			nonRoot := sc.RunAsNonRoot != nil && *sc.RunAsNonRoot || sc.RunAsNonRoot == nil && psc.RunAsNonRoot != nil && *psc.RunAsNonRoot
			uid := sc.RunAsUser
			if uid == nil {
				uid = psc.RunAsUser
			}
			seccomp := sc.SeccompProfile
			if seccomp == nil {
				seccomp = psc.SeccompProfile
			}
			switch {
			case !nonRoot:
				t.Errorf("%s: runAsNonRoot is not true", where)
			case uid == nil || *uid != 65532:
				t.Errorf("%s: runAsUser = %v, want 65532", where, uid)
			case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
				t.Errorf("%s: readOnlyRootFilesystem is not true", where)
			case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
				t.Errorf("%s: allowPrivilegeEscalation is not false", where)
			case sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0:
				t.Errorf("%s: capabilities = %+v, want drop ALL and add none", where, sc.Capabilities)
			case seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault:
				t.Errorf("%s: seccompProfile = %+v, want RuntimeDefault", where, seccomp)
			case sc.Privileged != nil && *sc.Privileged:
				t.Errorf("%s: privileged", where)
			}
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
				t.Errorf("%s: resources = %+v, want cpu and memory requests and a memory limit", where, c.Resources)
			}
			if p := c.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" {
				t.Errorf("%s: liveness probe %+v, want GET /healthz", where, p)
			}
			for name, field := range map[string]string{"POD_NAMESPACE": "metadata.namespace", "POD_NAME": "metadata.name"} {
				i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name })
				if i < 0 || c.Env[i].ValueFrom == nil || c.Env[i].ValueFrom.FieldRef == nil || c.Env[i].ValueFrom.FieldRef.FieldPath != field {
					t.Errorf("%s: env %s does not come from the downward API's %s", where, name, field)
				}
			}
			var settings, otel bool
			for _, e := range c.EnvFrom {
				if e.ConfigMapRef == nil {
					continue
				}
				optional := e.ConfigMapRef.Optional != nil && *e.ConfigMapRef.Optional
				settings = settings || strings.HasPrefix(e.ConfigMapRef.Name, "recond") && e.ConfigMapRef.Name != "recond-otel" && !optional
				otel = otel || e.ConfigMapRef.Name == "recond-otel" && optional
			}
			if !settings || !otel {
				t.Errorf("%s: envFrom %+v, want the settings ConfigMap and the optional recond-otel", where, c.EnvFrom)
			}
			mounts := map[string]corev1.Volume{}
			for _, m := range c.VolumeMounts {
				i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
				if i < 0 {
					t.Errorf("%s: mount of unknown volume %s", where, m.Name)
					continue
				}
				mounts[m.MountPath] = pod.Volumes[i]
			}
			if v := mounts["/tmp"]; v.EmptyDir == nil {
				t.Errorf("%s: /tmp is not an emptyDir (the root file system is read-only)", where)
			}
			if v := mounts["/etc/recond/git"]; v.Secret == nil || v.Secret.SecretName != "recond-git" || v.Secret.Optional == nil || !*v.Secret.Optional {
				t.Errorf("%s: /etc/recond/git is not the optional Secret recond-git", where)
			}
			if v := mounts["/etc/recond/sops"]; v.Secret == nil || v.Secret.SecretName != "recond-sops" || v.Secret.Optional == nil || !*v.Secret.Optional {
				t.Errorf("%s: /etc/recond/sops is not the optional Secret recond-sops (the age keys, docs/secrets.md)", where)
			}
			// The token: automounted, or projected into this container only.
			const tokenDir = "/var/run/secrets/kubernetes.io/serviceaccount"
			automount := pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken
			if v, ok := mounts[tokenDir]; ok {
				if automount || v.Projected == nil || !slices.ContainsFunc(v.Projected.Sources, func(s corev1.VolumeProjection) bool { return s.ServiceAccountToken != nil }) {
					t.Errorf("%s: %s must be a projected token with automount off", where, tokenDir)
				}
				for _, other := range pod.Containers {
					for _, m := range other.VolumeMounts {
						if other.Name != "recond" && m.Name == v.Name {
							t.Errorf("%s: container %s also mounts recond's token", where, other.Name)
						}
					}
				}
			} else if !automount {
				t.Errorf("%s: no API token: automountServiceAccountToken is false and no token is projected", where)
			}
			if pod.ServiceAccountName != "recond" {
				t.Errorf("%s: runs as ServiceAccount %q, want recond", where, pod.ServiceAccountName)
			}
		}
	}
}

// The base: one pod at a time (Recreate), readiness on /readyz, and a
// Service recond that the ServiceMonitor selects, scraped as job="recond"
// (which the alerts select) on the port the container serves, also while
// recond is not ready.
func TestBaseAndMonitoringFitTogether(t *testing.T) {
	base := render(t, "base").Objects
	var d appsv1.Deployment
	fromUnstructured(t, find(t, base, "Deployment", "recond"), &d)
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("Deployment recond: replicas %v, strategy %s; want 1 and Recreate", ptrString(d.Spec.Replicas), d.Spec.Strategy.Type)
	}
	containers := recondContainers(t, base)
	c := containers[firstKey(containers)]
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" {
		t.Errorf("readiness probe %+v, want GET /readyz", p)
	}
	if d.Spec.Template.Spec.AutomountServiceAccountToken == nil || !*d.Spec.Template.Spec.AutomountServiceAccountToken {
		t.Error("automountServiceAccountToken is not true")
	}
	var svc corev1.Service
	fromUnstructured(t, find(t, base, "Service", "recond"), &svc)
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("Service recond selects %v, not recond's pods %v", svc.Spec.Selector, d.Spec.Template.Labels)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "http-metrics" || svc.Spec.Ports[0].Port != 8080 {
		t.Fatalf("Service recond ports %+v, want http-metrics 8080", svc.Spec.Ports)
	}
	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool {
		return p.Name == svc.Spec.Ports[0].TargetPort.String() && p.ContainerPort == 8080
	}) {
		t.Errorf("Service targetPort %s is not the container's port 8080 (recond's default --listen)", svc.Spec.Ports[0].TargetPort.String())
	}
	if svc.Labels["app.kubernetes.io/name"] != "recond" || !svc.Spec.PublishNotReadyAddresses {
		t.Errorf("Service recond: labels %v, publishNotReadyAddresses %t", svc.Labels, svc.Spec.PublishNotReadyAddresses)
	}

	mon := render(t, "monitoring").Objects
	sm := find(t, mon, "ServiceMonitor", "recond")
	sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	if len(sel) == 0 || !labels.SelectorFromSet(sel).Matches(labels.Set(svc.Labels)) {
		t.Errorf("ServiceMonitor selector %v does not select Service recond %v", sel, svc.Labels)
	}
	// The Prometheus Operator names the job after the Service's jobLabel
	// label, or after the Service when there is none.
	job := svc.Name
	if jl, _, _ := unstructured.NestedString(sm.Object, "spec", "jobLabel"); jl != "" && svc.Labels[jl] != "" {
		job = svc.Labels[jl]
	}
	if job != "recond" {
		t.Errorf("the ServiceMonitor gives job=%q, the alerts select job=\"recond\"", job)
	}
	eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(eps) != 1 || eps[0].(map[string]any)["port"] != svc.Spec.Ports[0].Name {
		t.Errorf("ServiceMonitor endpoints %v, want port %s", eps, svc.Spec.Ports[0].Name)
	}
	rule := find(t, mon, "PrometheusRule", "recond")
	committed, err := decodeFile("monitoring/prometheusrule.yaml")
	if err != nil || len(committed) != 1 {
		t.Fatalf("monitoring/prometheusrule.yaml: %v", err)
	}
	if !equalJSON(t, rule.Object, committed[0].Object) {
		t.Error("the monitoring kustomization's PrometheusRule differs from monitoring/prometheusrule.yaml")
	}
	if b, _ := os.ReadFile("monitoring/prometheusrule.yaml"); !bytes.Contains(b, []byte(`job="`+job+`"`)) {
		t.Errorf("the alerts do not select job=%q, the job the ServiceMonitor gives", job)
	}
}

func firstKey[K comparable, V any](m map[K]V) K {
	for k := range m {
		return k
	}
	var zero K
	return zero
}

func equalJSON(t testing.TB, a, b map[string]any) bool {
	t.Helper()
	ja, err := (&unstructured.Unstructured{Object: a}).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	jb, err := (&unstructured.Unstructured{Object: b}).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(ja, jb)
}

// Each tenant overlay puts everything in its own namespace and points its
// recond at its own repository.
func TestTenantOverlaysAreSeparate(t *testing.T) {
	repos := map[string]string{}
	for _, tenant := range []string{"tenant-a", "tenant-b"} {
		objs := render(t, "examples/two-tenants/"+tenant).Objects
		find(t, objs, "Namespace", tenant)
		for _, o := range objs {
			if o.GetKind() != "Namespace" && o.GetNamespace() != tenant {
				t.Errorf("%s: %s/%s is in namespace %q", tenant, o.GetKind(), o.GetName(), o.GetNamespace())
			}
		}
		var rb rbacv1.RoleBinding
		fromUnstructured(t, find(t, objs, "RoleBinding", "recond"), &rb)
		for _, s := range rb.Subjects {
			if s.Namespace != "" && s.Namespace != tenant {
				t.Errorf("%s: RoleBinding binds a ServiceAccount of namespace %s", tenant, s.Namespace)
			}
		}
		for _, cm := range ofKinds(objs, "ConfigMap") {
			if repo, ok, _ := unstructured.NestedString(cm.Object, "data", "RECOND_REPO"); ok {
				repos[tenant] = repo
			}
		}
		if !strings.Contains(repos[tenant], tenant) {
			t.Errorf("%s: RECOND_REPO = %q, want the tenant's own repository", tenant, repos[tenant])
		}
	}
	if repos["tenant-a"] == repos["tenant-b"] {
		t.Errorf("both tenants reconcile %s", repos["tenant-a"])
	}
}

func ptrString[T any](p *T) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}
