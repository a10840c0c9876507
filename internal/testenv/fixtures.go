package testenv

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// DeploymentYAML is a Deployment "web" with one replica of nginx:1.27: the
// workload the tests apply, roll out (RollOut) and drift.
const DeploymentYAML = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
        - name: web
          image: nginx:1.27
`

// Progress reasons of a Deployment's Progressing condition, as the
// Deployment controller writes them.
const (
	RolledOut        = "NewReplicaSetAvailable"
	DeadlineExceeded = "ProgressDeadlineExceeded"
)

// RollOut plays the Deployment controller, which the test bed does not run:
// it writes Deployment name's status through the status subresource, for
// its current generation and replicas, rolled out (RolledOut) or stuck
// (DeadlineExceeded).
func RollOut(ctx context.Context, cs kubernetes.Interface, ns, name, progress string) error {
	d, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	n := int32(1)
	if d.Spec.Replicas != nil {
		n = *d.Spec.Replicas
	}
	progressing := corev1.ConditionTrue
	if progress == DeadlineExceeded {
		progressing = corev1.ConditionFalse
	}
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
			{Type: appsv1.DeploymentProgressing, Status: progressing, Reason: progress, Message: `ReplicaSet "` + name + `" progress`},
		},
	}
	_, err = cs.AppsV1().Deployments(ns).UpdateStatus(ctx, d, metav1.UpdateOptions{FieldManager: "kube-controller-manager"})
	return err
}

// CRDs is the resource of CustomResourceDefinitions.
var CRDs = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// InstallCRD creates the CustomResourceDefinition of crdYAML through dyn,
// waits (30 s at most) until the API server serves it (condition
// Established), deletes it when the test ends, and returns its name.
func InstallCRD(t testing.TB, dyn dynamic.Interface, crdYAML string) string {
	t.Helper()
	var u unstructured.Unstructured
	if err := yaml.Unmarshal([]byte(crdYAML), &u.Object); err != nil {
		t.Fatalf("CRD: %v", err)
	}
	ctx := context.Background()
	crds := dyn.Resource(CRDs)
	if _, err := crds.Create(ctx, &u, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create CRD %s: %v", u.GetName(), err)
	}
	t.Cleanup(func() { _ = crds.Delete(context.Background(), u.GetName(), metav1.DeleteOptions{}) })
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		got, err := crds.Get(ctx, u.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			if c, _ := c.(map[string]any); c["type"] == "Established" && c["status"] == "True" {
				return u.GetName()
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("CRD %s not established within 30 s: %v", u.GetName(), conds)
		}
	}
}

// GitHubPush is a GitHub push delivery (header X-GitHub-Delivery delivery)
// of body to url, signed with secret as GitHub signs (X-Hub-Signature-256).
func GitHubPush(url, delivery string, body []byte, secret string) *http.Request {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-GitHub-Delivery", delivery)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	return req
}
