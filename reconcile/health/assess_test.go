package health

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// load reads one object from testdata/. It goes through JSON as the API
// server's answers do, so numbers are int64 as in live objects.
func load(tb testing.TB, name string) *unstructured.Unstructured {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(js); err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	return u
}

func TestAssess(t *testing.T) {
	for _, tc := range []struct {
		file    string
		want    Status
		wantMsg string // a part of the message; "" means no message
	}{
		{"deployment-current.yaml", Current, ""},
		{"deployment-generation-behind.yaml", InProgress, "generation is 3, but latest observed generation is 2"},
		{"deployment-updated-short.yaml", InProgress, "Updated: 1/3"},
		{"deployment-deadline-exceeded.yaml", Failed, "Progress deadline exceeded"},
		{"deployment-terminating.yaml", Terminating, "deletion requested at 2026-01-01T00:00:00Z"},
		{"statefulset-current.yaml", Current, ""},
		{"statefulset-not-ready.yaml", InProgress, "Ready: 1/2"},
		{"daemonset-current.yaml", Current, ""},
		{"daemonset-not-observed.yaml", InProgress, "observedGeneration not found"},
		{"job-complete.yaml", Current, ""},
		{"job-failed.yaml", Failed, "Job Failed"},
		{"cronjob.yaml", Current, ""},
		{"pvc-bound.yaml", Current, ""},
		{"pvc-pending.yaml", InProgress, "phase: Pending"},
		{"service-lb-pending.yaml", InProgress, "load balancer has no ingress yet"},
		{"service-lb-ingress.yaml", Current, ""},
		{"service-clusterip.yaml", Current, ""},
		{"configmap.yaml", Current, ""},
		{"pdb.yaml", Current, ""},
		{"role-no-status.yaml", Current, ""},
		{"cr-ready-true.yaml", Current, ""},
		{"cr-ready-false.yaml", InProgress, "Ready=False: DependencyNotReady: waiting for bucket"},
		{"cr-stalled.yaml", Failed, "size must be odd"},
		{"cr-ready-unknown.yaml", InProgress, "Ready=Unknown"},
		{"cr-empty-conditions.yaml", Unknown, noReadableStatus},
		{"cr-reconciling.yaml", InProgress, "creating bucket"},
		{"cr-no-status.yaml", Unknown, noReadableStatus},
		{"cr-status-phase-only.yaml", Unknown, noReadableStatus},
		{"cr-k8s-io-group-no-status.yaml", Unknown, noReadableStatus},
		{"cr-observed-generation.yaml", Current, ""},
		{"cr-observed-generation-behind.yaml", InProgress, "generation is 3, but latest observed generation is 2"},
	} {
		t.Run(strings.TrimSuffix(tc.file, ".yaml"), func(t *testing.T) {
			got := Assess(load(t, tc.file), nil)
			checkAssessment(t, got, tc.want, tc.wantMsg)
		})
	}
}

func TestAssessRuleDecides(t *testing.T) {
	rules := mustRules(t, `
rules:
- apiVersion: example.com/v1beta1
  kind: Widget
  current: 'status.phase == "Ready"'
- apiVersion: apps/v1
  kind: Deployment
  current: 'true'
- apiVersion: v1
  kind: ConfigMap
  current: 'false'
`)
	for _, tc := range []struct {
		name string
		file string
		want Status
	}{
		// kstatus plus the stricter reading say unknown; the rule (for
		// another version of the same group) says current.
		{"rule over custom resource", "cr-status-phase-only.yaml", Current},
		// kstatus says current; the rule has the last word.
		{"rule over built-in kind", "configmap.yaml", InProgress},
		// A rule never hides a deletion.
		{"terminating before rule", "deployment-terminating.yaml", Terminating},
		// No rule for this kind: kstatus decides.
		{"other kind untouched", "pvc-pending.yaml", InProgress},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Assess(load(t, tc.file), rules)
			if diff := cmp.Diff(tc.want, got.Status); diff != "" {
				t.Errorf("status (-want +got):\n%s\nmessage: %q", diff, got.Message)
			}
		})
	}
}

func TestFromKstatusUnknown(t *testing.T) {
	// A Pod in a phase kstatus does not know makes Compute fail: unknown,
	// never current.
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "p", "namespace": "app"},
		"status":   map[string]any{"phase": "Exploded"},
	}}
	got := Assess(u, nil)
	if got.Status != Unknown || !strings.Contains(got.Message, "unknown phase Exploded") {
		t.Errorf("Assess = %+v, want unknown with kstatus's error", got)
	}
}

func TestIsBuiltin(t *testing.T) {
	for group, want := range map[string]bool{
		"":                          true,
		"apps":                      true,
		"networking.k8s.io":         true,
		"rbac.authorization.k8s.io": true,
		"apiextensions.k8s.io":      true,
		"autoscaling":               true,
		// CRD groups that look like Kubernetes' own.
		"autoscaling.k8s.io":           false,
		"gateway.networking.k8s.io":    false,
		"snapshot.storage.k8s.io":      false,
		"metrics.k8s.io":               false,
		"example.com":                  false,
		"source.toolkit.fluxcd.io":     false,
		"cert-manager.io":              false,
		"monitoring.coreos.com":        false,
		"policy.networking.k8s.io":     false,
		"x-k8s.io":                     false,
		"cluster.x-k8s.io":             false,
		"storage.k8s.io":               true,
		"flowcontrol.apiserver.k8s.io": true,
	} {
		if got := IsBuiltin(group); got != want {
			t.Errorf("IsBuiltin(%q) = %v, want %v", group, got, want)
		}
	}
}

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []Status
		want Instance
	}{
		{"none", nil, Healthy},
		{"all current", []Status{Current, Current}, Healthy},
		{"in progress", []Status{Current, InProgress}, Progressing},
		{"terminating", []Status{Terminating, Current}, Progressing},
		{"unknown over progressing", []Status{InProgress, Unknown, Current}, InstanceUnknown},
		{"failed over all", []Status{Unknown, Failed, InProgress, Terminating}, Degraded},
		{"failed alone", []Status{Failed}, Degraded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Of(tc.in)); diff != "" {
				t.Errorf("Of(%v) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

// BenchmarkAssess is the per-tick cost of assessing 1,000 mixed objects,
// a tenth of them under a CEL rule.
func BenchmarkAssess(b *testing.B) {
	rules := mustRules(b, `
rules:
- apiVersion: example.com/v1
  kind: Gadget
  current: 'status.phase == "Ready"'
  inProgress: 'status.phase == "Pending"'
  failed: 'status.phase == "Failed"'
`)
	files := []string{
		"deployment-current.yaml", "deployment-updated-short.yaml", "statefulset-current.yaml",
		"daemonset-current.yaml", "job-complete.yaml", "pvc-bound.yaml", "service-clusterip.yaml",
		"configmap.yaml", "cr-ready-true.yaml",
	}
	var objs []*unstructured.Unstructured
	for i := 0; len(objs) < 1000; i++ {
		if i%10 == 9 {
			u := load(b, "cr-status-phase-only.yaml")
			u.SetKind("Gadget")
			objs = append(objs, u)
			continue
		}
		objs = append(objs, load(b, files[i%len(files)]))
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, u := range objs {
			Assess(u, rules)
		}
	}
}

// checkAssessment compares an assessment with the status and the message
// part a case wants ("" wants no message).
func checkAssessment(t *testing.T, got Assessment, want Status, wantMsg string) {
	t.Helper()
	if diff := cmp.Diff(want, got.Status); diff != "" {
		t.Errorf("status (-want +got):\n%s\nmessage: %q", diff, got.Message)
	}
	if wantMsg == "" && got.Message != "" {
		t.Errorf("message = %q, want none", got.Message)
	}
	if !strings.Contains(got.Message, wantMsg) {
		t.Errorf("message = %q, want it to contain %q", got.Message, wantMsg)
	}
}
