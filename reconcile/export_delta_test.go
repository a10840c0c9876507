package reconcile

// IncrementalTicks is how many of r's ticks so far were incremental
// (deltaMemo).
func IncrementalTicks(r *Reconciler) int64 { return r.mem.incrementalTicks() }
