package diff

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// desiredObj parses YAML the way a manifest from Git is decoded: numbers
// become float64.
func desiredObj(t testing.TB, src string) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(src), &m); err != nil {
		t.Fatalf("parse desired: %v", err)
	}
	return &unstructured.Unstructured{Object: m}
}

// liveObj parses YAML the way client-go decodes an API response: integers
// become int64.
func liveObj(t testing.TB, src string) *unstructured.Unstructured {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(src))
	if err != nil {
		t.Fatalf("parse live: %v", err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(js); err != nil {
		t.Fatalf("decode live: %v", err)
	}
	return u
}

func fixture(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// field returns the map at path in u (no copy), failing the test if absent.
func field(t *testing.T, u *unstructured.Unstructured, path ...string) map[string]any {
	t.Helper()
	m, ok, err := unstructured.NestedFieldNoCopy(u.Object, path...)
	if !ok || err != nil {
		t.Fatalf("no map at %v: %v", path, err)
	}
	return m.(map[string]any)
}

// container returns the first container of a Deployment's pod template.
func container(t *testing.T, u *unstructured.Unstructured) map[string]any {
	t.Helper()
	cs, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "template", "spec", "containers")
	return cs.([]any)[0].(map[string]any)
}

// own adds a path to the fields recond's Apply entry (the first
// managedFields entry) owns on live, as if an earlier apply had set it.
func own(t *testing.T, live *unstructured.Unstructured, path ...string) {
	t.Helper()
	mf := live.Object["metadata"].(map[string]any)["managedFields"].([]any)[0].(map[string]any)
	m := mf["fieldsV1"].(map[string]any)
	for _, p := range path {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
}

// testSalt salts the masks of Secret values in tests.
var testSalt = []byte("test salt")

var recondOpts = Options{Manager: "recond", IgnoreAnnotations: []string{"recond.dev/revision"}, SecretSalt: testSalt}

func TestObject(t *testing.T) {
	const (
		web     = "spec.template.spec.containers[name=web]"
		webPort = "spec.template.spec.containers[name=web].ports[containerPort=80,protocol=TCP]"
	)
	tests := []struct {
		name          string
		desired, live string // fixtures
		editDesired   func(*testing.T, *unstructured.Unstructured)
		editLive      func(*testing.T, *unstructured.Unstructured)
		opts          *Options // recondOpts when nil
		want          Action
		fields        []FieldDiff
		uncertain     bool
	}{
		{
			name:    "deployment as the server returns it is unchanged",
			desired: "deployment.yaml", live: "deployment-live.yaml",
			want: Unchanged,
		},
		{
			name:    "replicas changed by another manager",
			desired: "deployment.yaml", live: "deployment-live.yaml",
			editLive: func(t *testing.T, u *unstructured.Unstructured) {
				field(t, u, "spec")["replicas"] = int64(3)
			},
			want:   Update,
			fields: []FieldDiff{{Path: "spec.replicas", Live: int64(3), Desired: float64(1)}},
		},
		{
			name:    "image changed in git",
			desired: "deployment.yaml", live: "deployment-live.yaml",
			editDesired: func(t *testing.T, u *unstructured.Unstructured) {
				container(t, u)["image"] = "nginx:1.26"
			},
			want:   Update,
			fields: []FieldDiff{{Path: web + ".image", Live: "nginx:1.25", Desired: "nginx:1.26"}},
		},
		{
			name:    "label added by another manager is ignored",
			desired: "deployment.yaml", live: "deployment-live.yaml",
			editLive: func(t *testing.T, u *unstructured.Unstructured) {
				field(t, u, "metadata", "labels")["team"] = "payments"
			},
			want: Unchanged,
		},
		{
			name:    "label value changed by another manager",
			desired: "deployment.yaml", live: "deployment-live.yaml",
			editLive: func(t *testing.T, u *unstructured.Unstructured) {
				field(t, u, "metadata", "labels")["app"] = "shop"
			},
			want:   Update,
			fields: []FieldDiff{{Path: "metadata.labels.app", Live: "shop", Desired: "web"}},
		},
		{
			name:    "label recond used to set removed from git",
			desired: "deployment.yaml", live: "deployment-live.yaml",
			editLive: func(t *testing.T, u *unstructured.Unstructured) {
				field(t, u, "metadata", "labels")["tier"] = "frontend"
				own(t, u, "f:metadata", "f:labels", "f:tier")
			},
			want:   Update,
			fields: []FieldDiff{{Path: "metadata.labels.tier", Live: "frontend", Desired: nil}},
		},
		{
			name:    "env var removed from git",
			desired: "deployment.yaml", live: "deployment-live.yaml",
			editDesired: func(t *testing.T, u *unstructured.Unstructured) {
				c := container(t, u)
				c["env"] = c["env"].([]any)[:1]
			},
			want: Update,
			fields: []FieldDiff{{
				Path:    web + ".env[name=MODE]",
				Live:    map[string]any{"name": "MODE", "value": "prod"},
				Desired: nil,
			}},
		},
		{
			name:    "container recond used to set removed from git",
			desired: "deployment.yaml", live: "deployment-live.yaml",
			editLive: func(t *testing.T, u *unstructured.Unstructured) {
				cs := field(t, u, "spec", "template", "spec")
				cs["containers"] = append(cs["containers"].([]any), map[string]any{"name": "proxy", "image": "envoy"})
				own(t, u, "f:spec", "f:template", "f:spec", "f:containers", `k:{"name":"proxy"}`, ".")
				own(t, u, "f:spec", "f:template", "f:spec", "f:containers", `k:{"name":"proxy"}`, "f:image")
				own(t, u, "f:spec", "f:template", "f:spec", "f:containers", `k:{"name":"proxy"}`, "f:name")
			},
			want: Update,
			fields: []FieldDiff{{
				Path:    "spec.template.spec.containers[name=proxy]",
				Live:    map[string]any{"name": "proxy", "image": "envoy"},
				Desired: nil,
			}},
		},
		{
			name:    "container injected by another manager is ignored",
			desired: "deployment.yaml", live: "deployment-live.yaml",
			editLive: func(t *testing.T, u *unstructured.Unstructured) {
				cs := field(t, u, "spec", "template", "spec")
				cs["containers"] = append([]any{map[string]any{"name": "istio-proxy", "image": "istio"}}, cs["containers"].([]any)...)
			},
			want: Unchanged,
		},
		{
			name:    "owned field already gone from live is no difference",
			desired: "deployment.yaml", live: "deployment-live.yaml",
			editLive: func(t *testing.T, u *unstructured.Unstructured) {
				own(t, u, "f:metadata", "f:labels", "f:tier")
			},
			want: Unchanged,
		},
		{
			name:    "cpu 0.5 equals 500m and memory as bytes equals 1Gi",
			desired: "deployment.yaml", live: "deployment-live.yaml",
			editDesired: func(t *testing.T, u *unstructured.Unstructured) {
				container(t, u)["resources"] = map[string]any{"requests": map[string]any{"cpu": 0.5, "memory": float64(1 << 30)}, "limits": map[string]any{"cpu": "1000m", "memory": "0.25Gi"}}
			},
			editLive: func(t *testing.T, u *unstructured.Unstructured) {
				container(t, u)["resources"] = map[string]any{
					"requests": map[string]any{"cpu": "500m", "memory": "1Gi"},
					"limits":   map[string]any{"cpu": "1", "memory": "256Mi"},
				}
			},
			want: Unchanged,
		},
		{
			name:    "cpu 1 equals \"1\"",
			desired: "deployment.yaml", live: "deployment-live.yaml",
			editDesired: func(t *testing.T, u *unstructured.Unstructured) {
				container(t, u)["resources"].(map[string]any)["limits"].(map[string]any)["cpu"] = float64(1)
			},
			editLive: func(t *testing.T, u *unstructured.Unstructured) {
				container(t, u)["resources"].(map[string]any)["limits"].(map[string]any)["cpu"] = "1"
			},
			want: Unchanged,
		},
		{
			name:    "cpu limit changed",
			desired: "deployment.yaml", live: "deployment-live.yaml",
			editLive: func(t *testing.T, u *unstructured.Unstructured) {
				container(t, u)["resources"].(map[string]any)["limits"].(map[string]any)["cpu"] = "2"
			},
			want:   Update,
			fields: []FieldDiff{{Path: web + ".resources.limits.cpu", Live: "2", Desired: float64(1)}},
		},
		{
			name:    "memory limit changed in git",
			desired: "deployment.yaml", live: "deployment-live.yaml",
			editDesired: func(t *testing.T, u *unstructured.Unstructured) {
				container(t, u)["resources"].(map[string]any)["limits"].(map[string]any)["memory"] = "512Mi"
			},
			want:   Update,
			fields: []FieldDiff{{Path: web + ".resources.limits.memory", Live: "256Mi", Desired: "512Mi"}},
		},
		{
			name:    "container port protocol defaulted by the server matches",
			desired: "deployment.yaml", live: "deployment-live.yaml",
			editLive: func(t *testing.T, u *unstructured.Unstructured) {
				container(t, u)["ports"].([]any)[0].(map[string]any)["hostPort"] = int64(0)
			},
			want: Unchanged,
		},
		{
			name:    "container port moved",
			desired: "deployment.yaml", live: "deployment-live.yaml",
			editDesired: func(t *testing.T, u *unstructured.Unstructured) {
				container(t, u)["ports"] = []any{map[string]any{"containerPort": float64(8080)}}
			},
			want: Update,
			fields: []FieldDiff{
				{Path: webPort, Live: map[string]any{"containerPort": int64(80), "protocol": "TCP"}, Desired: nil},
				{Path: web + ".ports[containerPort=8080,protocol=TCP]", Live: nil, Desired: map[string]any{"containerPort": float64(8080)}},
			},
		},
		{
			name:    "protocol recond once set, now left to the default",
			desired: "deployment.yaml", live: "deployment-live.yaml",
			editLive: func(t *testing.T, u *unstructured.Unstructured) {
				own(t, u, "f:spec", "f:template", "f:spec", "f:containers", `k:{"name":"web"}`,
					"f:ports", `k:{"containerPort":80,"protocol":"TCP"}`, "f:protocol")
			},
			want: Unchanged,
		},
		{
			name:    "finalizer recond set removed from git is one whole-list difference",
			desired: "deployment.yaml", live: "deployment-live.yaml",
			editDesired: func(t *testing.T, u *unstructured.Unstructured) {
				u.SetFinalizers([]string{"recond.dev/a"})
			},
			editLive: func(t *testing.T, u *unstructured.Unstructured) {
				u.SetFinalizers([]string{"recond.dev/a", "recond.dev/b"})
				own(t, u, "f:metadata", "f:finalizers", `v:"recond.dev/a"`)
				own(t, u, "f:metadata", "f:finalizers", `v:"recond.dev/b"`)
			},
			want: Update,
			fields: []FieldDiff{{
				Path:    "metadata.finalizers",
				Live:    []any{"recond.dev/a", "recond.dev/b"},
				Desired: []any{"recond.dev/a"},
			}},
		},
		{
			name:    "finalizer recond set removed with the whole list",
			desired: "deployment.yaml", live: "deployment-live.yaml",
			editLive: func(t *testing.T, u *unstructured.Unstructured) {
				u.SetFinalizers([]string{"recond.dev/b"})
				own(t, u, "f:metadata", "f:finalizers", `v:"recond.dev/b"`)
			},
			want:   Update,
			fields: []FieldDiff{{Path: "metadata.finalizers[=recond.dev/b]", Live: "recond.dev/b", Desired: nil}},
		},
		{
			name:    "empty desired list claims nothing in a named list others fill",
			desired: "deployment.yaml", live: "deployment-live.yaml",
			editDesired: func(t *testing.T, u *unstructured.Unstructured) {
				field(t, u, "spec", "template", "spec")["imagePullSecrets"] = []any{}
			},
			editLive: func(t *testing.T, u *unstructured.Unstructured) {
				field(t, u, "spec", "template", "spec")["imagePullSecrets"] = []any{map[string]any{"name": "regcred"}}
			},
			want: Unchanged,
		},
		{
			name:    "empty desired list replaces an unnamed list",
			desired: "deployment.yaml", live: "deployment-live.yaml",
			editDesired: func(t *testing.T, u *unstructured.Unstructured) {
				field(t, u, "spec", "template", "spec")["tolerations"] = []any{}
			},
			editLive: func(t *testing.T, u *unstructured.Unstructured) {
				field(t, u, "spec", "template", "spec")["tolerations"] = []any{map[string]any{"key": "a"}}
			},
			want:   Update,
			fields: []FieldDiff{{Path: "spec.template.spec.tolerations", Live: []any{map[string]any{"key": "a"}}, Desired: []any{}}},
		},
		{
			name:    "labels map dropped from git removes each owned label",
			desired: "deployment.yaml", live: "deployment-live.yaml",
			editDesired: func(t *testing.T, u *unstructured.Unstructured) {
				u.SetLabels(nil)
			},
			editLive: func(t *testing.T, u *unstructured.Unstructured) {
				field(t, u, "metadata", "labels")["team"] = "payments"
			},
			want:   Update,
			fields: []FieldDiff{{Path: "metadata.labels.app", Live: "web", Desired: nil}},
		},
		{
			name:    "ignored annotation differing",
			desired: "deployment.yaml", live: "deployment-live.yaml",
			editDesired: func(t *testing.T, u *unstructured.Unstructured) {
				u.SetAnnotations(map[string]string{"recond.dev/revision": "9e8d7c6"})
			},
			want: Unchanged,
		},
		{
			name:    "annotation differing when not ignored",
			desired: "deployment.yaml", live: "deployment-live.yaml",
			editDesired: func(t *testing.T, u *unstructured.Unstructured) {
				u.SetAnnotations(map[string]string{"recond.dev/revision": "9e8d7c6"})
			},
			opts:   &Options{Manager: "recond"},
			want:   Update,
			fields: []FieldDiff{{Path: "metadata.annotations.recond.dev/revision", Live: "3f2a9c1", Desired: "9e8d7c6"}},
		},
		{
			name:    "ignored annotation dropped from git is not a removal",
			desired: "deployment.yaml", live: "deployment-live.yaml",
			editDesired: func(t *testing.T, u *unstructured.Unstructured) {
				u.SetAnnotations(nil)
			},
			want: Unchanged,
		},
		{
			name:    "desired false and empty string equal absent",
			desired: "deployment.yaml", live: "deployment-live.yaml",
			editDesired: func(t *testing.T, u *unstructured.Unstructured) {
				field(t, u, "spec")["paused"] = false
				field(t, u, "spec", "template", "spec")["hostNetwork"] = false
				field(t, u, "spec", "template", "spec")["nodeSelector"] = map[string]any{}
				container(t, u)["workingDir"] = ""
				container(t, u)["args"] = []any{}
				field(t, u, "metadata")["finalizers"] = nil
			},
			want: Unchanged,
		},
		{
			name:    "desired true against absent is uncertain",
			desired: "deployment.yaml", live: "deployment-live.yaml",
			editDesired: func(t *testing.T, u *unstructured.Unstructured) {
				field(t, u, "spec", "template", "spec")["hostNetwork"] = true
			},
			want:      Update,
			fields:    []FieldDiff{{Path: "spec.template.spec.hostNetwork", Live: nil, Desired: true}},
			uncertain: true,
		},
		{
			name:    "list of maps without keys differing in length",
			desired: "deployment.yaml", live: "deployment-live.yaml",
			editDesired: func(t *testing.T, u *unstructured.Unstructured) {
				field(t, u, "spec", "template", "spec")["tolerations"] = []any{
					map[string]any{"key": "a", "operator": "Exists"},
					map[string]any{"key": "b", "operator": "Exists"},
				}
			},
			editLive: func(t *testing.T, u *unstructured.Unstructured) {
				field(t, u, "spec", "template", "spec")["tolerations"] = []any{
					map[string]any{"key": "a", "operator": "Exists"},
				}
			},
			want: Update,
			fields: []FieldDiff{{
				Path: "spec.template.spec.tolerations",
				Live: []any{map[string]any{"key": "a", "operator": "Exists"}},
				Desired: []any{
					map[string]any{"key": "a", "operator": "Exists"},
					map[string]any{"key": "b", "operator": "Exists"},
				},
			}},
		},
		{
			name:    "list of maps without keys matched by index",
			desired: "deployment.yaml", live: "deployment-live.yaml",
			editDesired: func(t *testing.T, u *unstructured.Unstructured) {
				field(t, u, "spec", "template", "spec")["tolerations"] = []any{map[string]any{"key": "a"}}
			},
			editLive: func(t *testing.T, u *unstructured.Unstructured) {
				field(t, u, "spec", "template", "spec")["tolerations"] = []any{map[string]any{"key": "b", "operator": "Equal"}}
			},
			want:   Update,
			fields: []FieldDiff{{Path: "spec.template.spec.tolerations[0].key", Live: "b", Desired: "a"}},
		},
		{
			name:    "list of scalars compares order",
			desired: "deployment.yaml", live: "deployment-live.yaml",
			editDesired: func(t *testing.T, u *unstructured.Unstructured) {
				container(t, u)["args"] = []any{"--a", "--b"}
			},
			editLive: func(t *testing.T, u *unstructured.Unstructured) {
				container(t, u)["args"] = []any{"--b", "--a"}
			},
			want:   Update,
			fields: []FieldDiff{{Path: web + ".args", Live: []any{"--b", "--a"}, Desired: []any{"--a", "--b"}}},
		},
		{
			name:    "service with server defaults is unchanged",
			desired: "service.yaml", live: "service-live.yaml",
			want: Unchanged,
		},
		{
			name:    "service targetPort changed",
			desired: "service.yaml", live: "service-live.yaml",
			editLive: func(t *testing.T, u *unstructured.Unstructured) {
				field(t, u, "spec")["ports"].([]any)[1].(map[string]any)["targetPort"] = "https"
			},
			want:   Update,
			fields: []FieldDiff{{Path: "spec.ports[port=443,protocol=TCP].targetPort", Live: "https", Desired: float64(8443)}},
		},
		{
			name:    "secret stringData against live data is uncertain",
			desired: "secret.yaml", live: "secret-live.yaml",
			want:      Update,
			fields:    []FieldDiff{{Path: "stringData.password", Live: nil, Desired: Mask(testSalt, []byte("hunter2"))}},
			uncertain: true,
		},
		{
			name:    "secret type changed as well is certain",
			desired: "secret.yaml", live: "secret-live.yaml",
			editLive: func(t *testing.T, u *unstructured.Unstructured) {
				u.Object["type"] = "kubernetes.io/basic-auth"
			},
			want: Update,
			fields: []FieldDiff{
				{Path: "stringData.password", Live: nil, Desired: Mask(testSalt, []byte("hunter2"))},
				{Path: "type", Live: "kubernetes.io/basic-auth", Desired: "Opaque"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			desired := desiredObj(t, fixture(t, tt.desired))
			live := liveObj(t, fixture(t, tt.live))
			if tt.editDesired != nil {
				tt.editDesired(t, desired)
			}
			if tt.editLive != nil {
				tt.editLive(t, live)
			}
			opts := recondOpts
			if tt.opts != nil {
				opts = *tt.opts
			}
			got := Object(desired, live, opts)
			if got.Action != tt.want {
				t.Errorf("Action = %q, want %q; change:\n%s", got.Action, tt.want, got)
			}
			if !reflect.DeepEqual(got.Fields, tt.fields) {
				t.Errorf("Fields mismatch (-want +got):\n%s", fieldsDiff(tt.fields, got.Fields))
			}
			if got.Uncertain != tt.uncertain {
				t.Errorf("Uncertain = %v, want %v", got.Uncertain, tt.uncertain)
			}
			if got.Kind != desired.GetKind() || got.Name != desired.GetName() || got.Desired != desired || got.Live != live {
				t.Errorf("identity = %s/%s desired=%p live=%p, want %s/%s %p %p",
					got.Kind, got.Name, got.Desired, got.Live, desired.GetKind(), desired.GetName(), desired, live)
			}
		})
	}
}

func TestObjectCreateDelete(t *testing.T) {
	desired := desiredObj(t, fixture(t, "deployment.yaml"))
	live := liveObj(t, fixture(t, "deployment-live.yaml"))

	got := Object(desired, nil, recondOpts)
	want := Change{Kind: "Deployment", Name: "web", Action: Create, Desired: desired}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Object(desired, nil) mismatch (-want +got):\n- %+v\n+ %+v", want, got)
	}
	got = Object(nil, live, recondOpts)
	want = Change{Kind: "Deployment", Name: "web", Action: Delete, Live: live}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Object(nil, live) mismatch (-want +got):\n- %+v\n+ %+v", want, got)
	}
}

func TestObjects(t *testing.T) {
	dep := desiredObj(t, fixture(t, "deployment.yaml"))
	svc := desiredObj(t, fixture(t, "service.yaml"))
	newCM := desiredObj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: new, namespace: shop}\ndata: {a: b}\n")
	otherNS := desiredObj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: old, namespace: other}\n")

	liveDep := liveObj(t, fixture(t, "deployment-live.yaml"))
	liveDep.SetAPIVersion("apps/v1beta2") // same group: still pairs
	liveSvc := liveObj(t, fixture(t, "service-live.yaml"))
	liveSecret := liveObj(t, fixture(t, "secret-live.yaml"))
	liveOld := liveObj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: old, namespace: shop}\n")
	liveWebCM := liveObj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web, namespace: shop}\n")

	got := Objects(
		[]*unstructured.Unstructured{svc, newCM, dep, otherNS},
		[]*unstructured.Unstructured{liveSecret, liveDep, liveOld, liveWebCM, nil, liveSvc},
		recondOpts,
	)
	var lines []string
	for _, c := range got {
		lines = append(lines, fmt.Sprintf("%s %s/%s", c.Action, c.Kind, c.Name))
	}
	want := []string{
		"unchanged Service/web",
		"create ConfigMap/new",
		"unchanged Deployment/web",
		"create ConfigMap/old",
		"delete ConfigMap/old",
		"delete ConfigMap/web",
		"delete Secret/creds",
	}
	if !reflect.DeepEqual(lines, want) {
		t.Errorf("Objects mismatch (-want +got):\n- %s\n+ %s", strings.Join(want, "\n- "), strings.Join(lines, "\n+ "))
	}
	if got[2].Live != liveDep || got[4].Live != liveOld || got[4].Desired != nil {
		t.Errorf("pairing: got Deployment live %p (want %p), delete live %p desired %v", got[2].Live, liveDep, got[4].Live, got[4].Desired)
	}
}

func TestEquivalent(t *testing.T) {
	tests := []struct {
		name string
		edit func(*testing.T, *unstructured.Unstructured)
		opts Options
		want []FieldDiff
	}{
		{
			name: "server metadata and ignored annotation differ",
			edit: func(t *testing.T, u *unstructured.Unstructured) {
				u.SetResourceVersion("99999")
				u.SetGeneration(4)
				u.SetManagedFields(nil)
				u.SetUID("other")
				field(t, u, "metadata")["creationTimestamp"] = "2030-01-01T00:00:00Z"
				field(t, u, "metadata", "annotations")["recond.dev/revision"] = "9e8d7c6"
				field(t, u, "status")["readyReplicas"] = int64(0)
			},
			opts: recondOpts,
		},
		{
			name: "replicas differ",
			edit: func(t *testing.T, u *unstructured.Unstructured) {
				u.SetResourceVersion("99999")
				field(t, u, "spec")["replicas"] = int64(3)
			},
			opts: recondOpts,
			want: []FieldDiff{{Path: "spec.replicas", Live: int64(1), Desired: int64(3)}},
		},
		{
			name: "annotation differs when not ignored",
			edit: func(t *testing.T, u *unstructured.Unstructured) {
				field(t, u, "metadata", "annotations")["recond.dev/revision"] = "9e8d7c6"
			},
			want: []FieldDiff{{Path: "metadata.annotations.recond.dev/revision", Live: "3f2a9c1", Desired: "9e8d7c6"}},
		},
		{
			name: "field only in live, container only in dry-run",
			edit: func(t *testing.T, u *unstructured.Unstructured) {
				delete(field(t, u, "spec"), "revisionHistoryLimit")
				cs := field(t, u, "spec", "template", "spec")
				cs["containers"] = append(cs["containers"].([]any), map[string]any{"name": "proxy"})
			},
			opts: recondOpts,
			want: []FieldDiff{
				{Path: "spec.revisionHistoryLimit", Live: int64(10), Desired: nil},
				{Path: "spec.template.spec.containers[name=proxy]", Live: nil, Desired: map[string]any{"name": "proxy"}},
			},
		},
		{
			name: "number decoded as float equals int",
			edit: func(t *testing.T, u *unstructured.Unstructured) {
				field(t, u, "spec")["replicas"] = float64(1)
			},
			opts: recondOpts,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			live := liveObj(t, fixture(t, "deployment-live.yaml"))
			dryRun := live.DeepCopy()
			tt.edit(t, dryRun)
			got := Equivalent(dryRun, live, tt.opts)
			if len(got) == 0 && len(tt.want) == 0 {
				return
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Equivalent mismatch (-want +got):\n%s", fieldsDiff(tt.want, got))
			}
		})
	}
}

func TestChangeString(t *testing.T) {
	tests := []struct {
		change Change
		want   string
	}{
		{Change{Kind: "Deployment", Name: "web", Action: Create}, "Deployment/web: create"},
		{Change{Kind: "ConfigMap", Name: "old", Action: Delete}, "ConfigMap/old: delete"},
		{Change{Kind: "Deployment", Name: "web", Action: Unchanged}, "Deployment/web: unchanged"},
		{
			Change{Kind: "Deployment", Name: "web", Action: Update, Fields: []FieldDiff{
				{Path: "metadata.labels.tier", Live: "frontend"},
				{Path: "spec.replicas", Live: int64(2), Desired: float64(1)},
			}},
			"Deployment/web metadata.labels.tier: \"frontend\" -> <none>\n" +
				"Deployment/web spec.replicas: 2 -> 1",
		},
		{
			Change{Kind: "Secret", Name: "creds", Action: Update, Uncertain: true, Fields: []FieldDiff{
				{Path: "stringData.password", Desired: "<secret sha256:3f2a9c1e>"},
			}},
			"Secret/creds: update (uncertain)\n" +
				"Secret/creds stringData.password: <none> -> \"<secret sha256:3f2a9c1e>\"",
		},
	}
	for _, tt := range tests {
		if got := tt.change.String(); got != tt.want {
			t.Errorf("String() mismatch (-want +got):\n- %s\n+ %s", tt.want, got)
		}
	}
}

func fieldsDiff(want, got []FieldDiff) string {
	var b strings.Builder
	for i := 0; i < max(len(want), len(got)); i++ {
		var w, g string
		if i < len(want) {
			w = fmt.Sprintf("%#v", want[i])
		}
		if i < len(got) {
			g = fmt.Sprintf("%#v", got[i])
		}
		if w != g {
			fmt.Fprintf(&b, "- %s\n+ %s\n", w, g)
		}
	}
	return b.String()
}
