package reconcile

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"recond.dev/recond/reconcile/optout"
)

// SkipReason says why the loop left an object, or part of one, alone
// (optout.Reason). The values are a contract: recond_skipped_resources{reason}
// uses them.
type SkipReason = optout.Reason

// Every reason an object is skipped.
const (
	SkipReconcileDisabled = optout.ReconcileDisabled
	SkipCreateOnly        = optout.CreateOnly
	SkipPruneDisabled     = optout.PruneDisabled
	SkipIgnoreFields      = optout.IgnoreFields
)

// SkipReasons lists every SkipReason, so that labelled series can be
// pre-initialised.
var SkipReasons = optout.Reasons

// Skip is one object an opt-out held back at a tick (optout.Skip).
type Skip = optout.Skip

// optOuts takes the objects recond.dev/reconcile: disabled (in Git or on
// the live object; of desiredAll and liveAll, the tick's objects or those
// an incremental tick read again) out of the comparison, desired and live
// alike: neither
// written, healed nor pruned. It records them as skipped, with the objects
// whose fields recond.dev/ignore-fields leaves out, and the live objects'
// misspelt opt-outs.
func optOuts(st *State, desiredAll, liveAll, desired, live []*unstructured.Unstructured) ([]*unstructured.Unstructured, []*unstructured.Unstructured) {
	sel := optout.Select(desiredAll, liveAll, st.Ignored, objectKey)
	st.Skipped = append(st.Skipped, sel.Skipped...)
	st.misspelt = append(st.misspelt, sel.Misspelt...)
	return sel.Keep(desired), sel.Keep(live)
}

// refOf is a reference to a live object.
func refOf(u *unstructured.Unstructured) ObjectRef {
	return ObjectRef{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Name: u.GetName(), UID: u.GetUID(), ResourceVersion: u.GetResourceVersion()}
}
