package health

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

// builtinGroups are the API groups kube-apiserver itself serves. Any other
// group is a custom resource's (served by a CRD or an aggregated API server)
// and gets recond's stricter reading. The list is explicit on purpose: a
// suffix test such as ".k8s.io" would take CRD groups like
// autoscaling.k8s.io, gateway.networking.k8s.io or snapshot.storage.k8s.io
// for built-in ones.
var builtinGroups = map[string]bool{
	"":                             true,
	"apps":                         true,
	"batch":                        true,
	"policy":                       true,
	"autoscaling":                  true,
	"extensions":                   true,
	"admissionregistration.k8s.io": true,
	"apiextensions.k8s.io":         true,
	"apiregistration.k8s.io":       true,
	"authentication.k8s.io":        true,
	"authorization.k8s.io":         true,
	"certificates.k8s.io":          true,
	"coordination.k8s.io":          true,
	"discovery.k8s.io":             true,
	"events.k8s.io":                true,
	"flowcontrol.apiserver.k8s.io": true,
	"internal.apiserver.k8s.io":    true,
	"lifecycle.k8s.io":             true,
	"networking.k8s.io":            true,
	"node.k8s.io":                  true,
	"rbac.authorization.k8s.io":    true,
	"resource.k8s.io":              true,
	"scheduling.k8s.io":            true,
	"storage.k8s.io":               true,
	"storagemigration.k8s.io":      true,
}

// IsBuiltin reports whether group is an API group kube-apiserver itself
// serves (the core group is ""); objects of any other group are custom
// resources.
func IsBuiltin(group string) bool { return builtinGroups[group] }

// noReadableStatus is the message of a custom resource kstatus would call
// current although its status says nothing.
const noReadableStatus = "no status that says it is ready (no conditions, no observedGeneration); " +
	"add a --health-rules rule for this kind if it has none"

// Assess is the health of the live object u. rules may be nil. In order:
// an object being deleted is Terminating; a kind with a rule in rules is
// what the rule says; any other is what kstatus computes, read more strictly
// for custom resources (a status that says nothing is Unknown, a Ready
// condition that is not True is InProgress) and for Services of type
// LoadBalancer (InProgress until an ingress is assigned).
func Assess(u *unstructured.Unstructured, rules *Rules) Assessment {
	if ts := u.GetDeletionTimestamp(); ts != nil {
		return Assessment{Status: Terminating, Message: "deletion requested at " + ts.UTC().Format("2006-01-02T15:04:05Z")}
	}
	gvk := u.GroupVersionKind()
	if r := rules.lookup(gvk.Group, gvk.Kind); r != nil {
		return r.assess(u)
	}
	res, err := kstatus.Compute(u)
	if err != nil {
		return Assessment{Status: Unknown, Message: fmt.Sprintf("compute status: %v", err)}
	}
	a := fromKstatus(res)
	switch {
	case !IsBuiltin(gvk.Group):
		return customResource(u, a)
	case gvk.Group == "" && gvk.Kind == "Service":
		return loadBalancer(u, a)
	}
	return a
}

// fromKstatus maps kstatus's result onto Status; NotFound and anything
// unexpected are Unknown, so they never pass as healthy.
func fromKstatus(res *kstatus.Result) Assessment {
	switch res.Status {
	case kstatus.CurrentStatus:
		return Assessment{Status: Current}
	case kstatus.InProgressStatus:
		return Assessment{Status: InProgress, Message: res.Message}
	case kstatus.FailedStatus:
		return Assessment{Status: Failed, Message: res.Message}
	case kstatus.TerminatingStatus:
		return Assessment{Status: Terminating, Message: res.Message}
	}
	msg := res.Message
	if msg == "" {
		msg = "kstatus says " + string(res.Status)
	}
	return Assessment{Status: Unknown, Message: msg}
}

// customResource reads a custom resource more strictly than kstatus, which
// calls current anything it cannot read. kstatus's own verdicts from
// Reconciling, Stalled and a generation not yet observed stay.
func customResource(u *unstructured.Unstructured, a Assessment) Assessment {
	if a.Status != Current && a.Status != InProgress {
		return a
	}
	st, ok := u.Object["status"].(map[string]any)
	if !ok {
		if a.Status == Current {
			return Assessment{Status: Unknown, Message: noReadableStatus}
		}
		return a
	}
	conds, _ := st["conditions"].([]any)
	_, hasObserved := st["observedGeneration"]
	if len(conds) == 0 && !hasObserved {
		if a.Status == Current {
			return Assessment{Status: Unknown, Message: noReadableStatus}
		}
		return a
	}
	if generationBehind(u, st) {
		return a
	}
	for _, c := range conds {
		m, _ := c.(map[string]any)
		typ, _ := m["type"].(string)
		status, _ := m["status"].(string)
		switch {
		case typ == "Reconciling" && status == "True":
			return a // kstatus already said InProgress, with its message
		case typ == "Stalled" && status == "True":
			return a
		}
	}
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if typ, _ := m["type"].(string); typ != "Ready" {
			continue
		}
		status, _ := m["status"].(string)
		if status == "True" {
			return a
		}
		parts := []string{"Ready=" + status}
		for _, k := range []string{"reason", "message"} {
			if v, _ := m[k].(string); v != "" {
				parts = append(parts, v)
			}
		}
		return Assessment{Status: InProgress, Message: strings.Join(parts, ": ")}
	}
	return a
}

// generationBehind reports whether the status says it observed a generation
// older than the object's.
func generationBehind(u *unstructured.Unstructured, st map[string]any) bool {
	og, ok := st["observedGeneration"].(int64)
	return ok && og != u.GetGeneration()
}

// loadBalancer keeps a Service of type LoadBalancer in progress until its
// load balancer has an ingress: kstatus only looks at spec.clusterIP, which
// is set at once, so it would call current a Service nobody can reach.
func loadBalancer(u *unstructured.Unstructured, a Assessment) Assessment {
	if a.Status != Current {
		return a
	}
	if typ, _, _ := unstructured.NestedString(u.Object, "spec", "type"); typ != "LoadBalancer" {
		return a
	}
	ing, _, _ := unstructured.NestedSlice(u.Object, "status", "loadBalancer", "ingress")
	if len(ing) == 0 {
		return Assessment{Status: InProgress, Message: "load balancer has no ingress yet"}
	}
	return a
}
