// Package reconcile holds recond's loop: one tick reads the desired state from
// Git, observes the live objects, diffs them, applies what differs and
// assesses the health of what runs, then waits for the next tick.
//
// A tick runs five phases in order (PhaseRead, PhaseObserve, PhaseDiff,
// PhaseApply, PhaseHealth), as the table in tick.go says. Each phase is a
// method of the tick (one tick's State beside the Reconciler, whose memory
// outlives it: memory.go) and knows nothing of metrics: one wrapper in
// tick.go times every phase, classifies its error once into a Reason and
// tells the Observers, which make the phase's span. A phase adds to that
// span only through its context: attributes on it, and child spans for its
// requests (spans.go), made by whatever provider started it (a no-op when
// tracing is off), without a tracing package. A phase logs only what it
// alone can tell (a warning, a render it stopped) with the engine's logger;
// the lines about the tick and its phases are the LogObserver's. Every
// write goes through one gate (gate.go), whose list of rules the apply
// phase and the cluster client both read. The tick returns a Result that
// logs, metrics and spans read; they never re-derive it.
package reconcile
