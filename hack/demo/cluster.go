package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// What the demo does to the cluster as a person or a controller would,
// and the Events it reads back.

// eventCounts counts the namespace's Events by name, a repeat counted in
// its series.
func eventCounts(ctx context.Context, cs kubernetes.Interface, ns string) (map[string]int32, error) {
	l, err := cs.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]int32{}
	for _, e := range l.Items {
		n := int32(1)
		if e.Series != nil {
			n = e.Series.Count
		}
		out[e.Reason+" "+e.Regarding.Kind+"/"+e.Regarding.Name] += n
	}
	return out, nil
}

// printEvents prints the namespace's Events with reason (all when ""),
// waiting a little for one: Events are sent in the background.
func printEvents(ctx context.Context, cs kubernetes.Interface, ns, reason string) error {
	opts := metav1.ListOptions{}
	if reason != "" {
		opts.FieldSelector = "reason=" + reason
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, err := cs.EventsV1().Events(ns).List(ctx, opts)
		if err != nil {
			return err
		}
		if len(l.Items) > 0 || time.Now().After(deadline) {
			slices.SortFunc(l.Items, func(a, b eventsv1.Event) int { return a.EventTime.Compare(b.EventTime.Time) })
			for _, e := range l.Items {
				times := ""
				if e.Series != nil {
					times = fmt.Sprintf(" (x%d, the first shown)", e.Series.Count)
				}
				fmt.Printf("  Event %-8s %-16s %s/%s: %s%s\n", e.Type, e.Reason, e.Regarding.Kind, e.Regarding.Name, e.Note, times)
			}
			if len(l.Items) == 0 {
				fmt.Printf("  no Event with reason %s\n", reason)
			}
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// annotate merges ann (a nil value removes one) into Deployment name's
// annotations, as `kubectl annotate` does.
func annotate(ctx context.Context, cs kubernetes.Interface, ns, name string, ann map[string]any) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	if err != nil {
		return err
	}
	_, err = cs.AppsV1().Deployments(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kubectl-annotate"})
	return err
}

func scale(ctx context.Context, cs kubernetes.Interface, ns string, n int32) error {
	s := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: n}}
	cur, err := cs.AppsV1().Deployments(ns).GetScale(ctx, "web", metav1.GetOptions{})
	if err != nil {
		return err
	}
	s.ResourceVersion = cur.ResourceVersion
	_, err = cs.AppsV1().Deployments(ns).UpdateScale(ctx, "web", s, metav1.UpdateOptions{FieldManager: "kubectl"})
	return err
}

// completeJob plays the Job controller: Job name's Complete condition
// becomes True.
func completeJob(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
	j, err := cs.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	now := metav1.Now()
	j.Status = batchv1.JobStatus{StartTime: &now, CompletionTime: &now, Succeeded: 1, Conditions: []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
	}}
	_, err = cs.BatchV1().Jobs(ns).UpdateStatus(ctx, j, metav1.UpdateOptions{FieldManager: "job-controller"})
	return err
}
