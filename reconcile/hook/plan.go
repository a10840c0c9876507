package hook

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"recond.dev/recond/reconcile/cluster"
)

// Plan is what one hook of a revision would do.
type Plan struct {
	// Hook is "Kind/name"; Events what it runs for ("pre-install"), and
	// Weight its order within them.
	Hook   string   `json:"hook"`
	Events []string `json:"events"`
	Weight int      `json:"weight"`
	// Deletes is the object an earlier run left that it deletes first
	// (before-hook-creation), "Kind/name".
	Deletes string `json:"deletes,omitempty"`
	// Refused is why the write gate would refuse it ("": it would not).
	Refused string `json:"refused,omitempty"`
	// Err is the refusal itself (or the failure to read live).
	Err error `json:"-"`
}

func (p Plan) String() string {
	s := fmt.Sprintf("hook %s (%s, weight %d): creates %s", p.Hook, strings.Join(p.Events, ","), p.Weight, p.Hook)
	if p.Deletes != "" {
		s += ", after deleting the " + p.Deletes + " an earlier run left"
	}
	if p.Refused != "" {
		s += "; refused: " + p.Refused
	}
	return s
}

// PlanOf says what h would do, given the live object of its name (live;
// nil: none) or the error reading it (err), by the write gate's rules
// (check) over the object it would create and the one it would replace.
func PlanOf(h *Hook, live *unstructured.Unstructured, err error, check func(cluster.Write) error) Plan {
	p := Plan{Hook: h.Key(), Events: h.Events, Weight: h.Weight}
	if err == nil {
		if live != nil && h.Has(BeforeCreation) {
			p.Deletes = live.GetKind() + "/" + live.GetName()
			err = check(cluster.Write{Purpose: cluster.PurposeHook, Verb: cluster.VerbDelete, GVK: live.GroupVersionKind(), Name: live.GetName(), Live: live})
			live = nil
		}
		if err == nil {
			err = check(cluster.Write{Purpose: cluster.PurposeHook, Verb: cluster.VerbApply, GVK: h.Object.GroupVersionKind(), Name: h.Object.GetName(), Object: h.Object, Live: live})
		}
	}
	if err != nil {
		p.Err, p.Refused = err, err.Error()
	}
	return p
}
