package testenv

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
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
