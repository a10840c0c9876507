// Package reconcile holds recond's loop: one tick reads the desired state from
// Git, observes the live objects, diffs them, applies what differs and
// assesses the health of what runs, then waits for the next tick.
//
// A tick runs five phases in order (PhaseRead, PhaseObserve, PhaseDiff,
// PhaseApply, PhaseHealth), as the table in tick.go says. Each phase is a
// function of (ctx, *State) that knows nothing of metrics, tracing or logs:
// one wrapper in tick.go times every phase, classifies its error once into a
// Reason and tells the Observers. The tick
// returns a Result that logs, metrics and spans read; they never re-derive it.
package reconcile
