package hook

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"recond.dev/recond/reconcile/health"
)

// Status says whether a hook's live object (nil: gone) succeeded
// (Current), failed or is still running (InProgress), and why: a Job by its
// Complete and Failed conditions, anything else by its health.
func Status(live *unstructured.Unstructured) (health.Status, string) {
	if live == nil {
		return health.Failed, "its object is gone"
	}
	if live.GetKind() == "Job" && live.GroupVersionKind().Group == "batch" {
		conds, _, _ := unstructured.NestedSlice(live.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["status"] != "True" {
				continue
			}
			switch m["type"] {
			case "Complete":
				return health.Current, ""
			case "Failed":
				msg, _ := m["message"].(string)
				reason, _ := m["reason"].(string)
				return health.Failed, strings.TrimSpace("Job failed: " + reason + " " + msg)
			}
		}
		return health.InProgress, ""
	}
	a := health.Assess(live, nil)
	switch a.Status {
	case health.Current, health.Failed:
		return a.Status, a.Message
	}
	return health.InProgress, a.Message
}
