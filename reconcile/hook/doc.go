// Package hook holds the rules of a chart's hooks (Helm's helm.sh/hook
// annotations) as recond runs them: what a hook object's annotations say
// (the events it runs for, its weight, its delete policies), the order the
// hooks of an event run in, the state of a revision's hook run that the
// inventory records (so that they run once per revision, and a restart
// neither runs them again nor forgets one that is running), the bounds of
// that state, whether a hook's live object succeeded, and the plan of what
// each hook would do. It is pure: the engine (package reconcile) creates,
// waits for and deletes the hook objects, through the write gate.
package hook
