package reconcile

import "context"

// SettleEnded settles, as a tick that read an ended suspension at the
// inventory's resourceVersion rv would: it removes the suspension's
// annotations unless the inventory changed since.
func SettleEnded(ctx context.Context, r *Reconciler, rv string) error {
	st := &State{cfg: r.cfg, recreates: &keySet{}, suspension: suspensionState{Stale: true, RV: rv}, suspensionRead: true}
	return suspensionStore{r}.settle(ctx, st)
}
