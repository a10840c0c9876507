// Package writerule holds the per-object rules of recond's write gate: what
// recond may write, judged from the write alone (its purpose, the object
// applied, the object as last seen). Ownership (another instance's object,
// an unowned or hand-made one), the opt-outs on the live object, the
// reserved names and the claim rules are here, each a small function, and
// Check reads them as one list. The engine's gate (reconcile/gate.go)
// asks Check before every write, after the rules that need the process's
// state (the Lease, the suspension as it is now, a dry run) and before the
// one that needs the API server (the claims an object owns transitively,
// Claims). Nothing here does I/O.
package writerule
