package reconcile

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"recond.dev/recond/internal/redact"
	"recond.dev/recond/reconcile/heal"
	"recond.dev/recond/reconcile/health"
	"recond.dev/recond/reconcile/hook"
	"recond.dev/recond/reconcile/inventory"
	"recond.dev/recond/reconcile/source"
	"recond.dev/recond/reconcile/suspend"
	"recond.dev/recond/reconcile/verdict"
)

// memory is what the engine keeps between ticks, apart from what the
// phases of one tick hand each other (State): gitops-engine keeps its
// cluster cache (pkg/cache) apart from the syncContext of one sync. One
// mutex guards all of it: a phase abandoned by its tick may return during a
// later one, the calls of a wave run at once, and watch events and the
// API's requests (Suspend, Resume, Secrets) arrive while a tick runs. Each
// accessor holds it for a few map operations, calls no other accessor and
// does no I/O; the one exception is the objects' progress, which the
// health phase holds while it assesses every object: it has a mutex of its
// own (progressMu), so that a watch event never waits for an assessment.
// The zero memory is ready (the engine's own tests make a
// Reconciler without New).
type memory struct {
	mu sync.Mutex

	// inv is the inventory as recond last read or wrote it (nil until
	// first loaded); invStale is set when the live one was found missing
	// or unlike it: the apply phase rewrites it (inventoryStore.repair).
	inv      *inventory.Inventory
	invStale bool
	// rendered is the last successful render, reused while the revision
	// does not move; failed the last render that failed for a reason of
	// its revision (failedBefore).
	rendered renderCache
	failed   *renderFailure
	// quiet is what the last full tick that found nothing to do leaves for
	// the next ones (observe_quiet.go).
	quiet *quietMemo
	// delta is what the last tick leaves for an incremental one
	// (observe_delta.go), index the index of the render it worked with;
	// deltaTicks counts the incremental ticks.
	delta      *deltaMemo
	index      *desiredIndex
	deltaTicks int64
	// verdicts are what the server showed equivalent, and the creates a
	// dry run accepted.
	verdicts verdict.Book
	// heal follows drift seen by a watch to the write that restores it.
	heal heal.Book
	// progress follows each desired object's health across ticks; healthy
	// is the last revision a tick found healthy (post-hooks wait for it).
	progressMu sync.Mutex
	progress   health.Progress
	healthy    string
	// suspend keeps when a suspension without a readable end was first
	// seen (so that its end does not move from tick to tick until it is
	// written); suspendLast is the suspension the last reading found in
	// force; resumedBy who resumed through Resume, for the next tick's
	// Result.
	suspend     suspend.Memo
	suspendLast *Suspension
	resumedBy   string
	// misspelt are the live opt-out annotations already warned about.
	misspelt map[string]bool
	// pace is the last fetch (pace.go); restarts the watch caches'
	// restarts counted by the ticks so far.
	pace     fetchPace
	restarts int64
}

// renderCache is a decorated desired set and the revision it was rendered
// at. The objects are never mutated after read.
type renderCache struct {
	sha     string
	desired []*unstructured.Unstructured
	hooks   []*hook.Hook
	chart   *source.Chart
	once    map[string][][]string
	ignored map[string][]string
	// firsts is the first desired object of each kind (checkScopes).
	firsts []*unstructured.Unstructured
	// values are what the revision decrypted that is secret (the source's
	// SensitiveValues); sensitive matches them and the previous render's.
	values, prev []string
	sensitive    *redact.Set
}

// inventory is the copy in memory (nil until first loaded).
func (m *memory) inventory() *inventory.Inventory {
	inv, _ := m.inventoryState()
	return inv
}

// inventoryState is the copy in memory and whether the live inventory was
// found missing or unlike it since recond last wrote it.
func (m *memory) inventoryState() (*inventory.Inventory, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.inv, m.invStale
}

// setInventory records what the server holds now (or held when read).
func (m *memory) setInventory(inv *inventory.Inventory) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.inv, m.invStale = inv, false
}

// markInventoryStale records inv as the copy in memory, to be written
// whatever the server holds, and reports whether it was marked already
// (the loss was reported).
func (m *memory) markInventoryStale(inv *inventory.Inventory) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	was := m.invStale
	m.inv, m.invStale = inv, true
	return was
}

// renderOf is the kept render of sha, if there is one.
func (m *memory) renderOf(sha string) (renderCache, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rendered.sha == "" || m.rendered.sha != sha {
		return renderCache{}, false
	}
	return m.rendered, true
}

// previousValues are the secret values of the render before one of sha:
// the kept render's, or, when it was of sha too (rendered again with new
// keys), what it held as previous.
func (m *memory) previousValues(sha string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rendered.sha == sha {
		return m.rendered.prev
	}
	return m.rendered.values
}

// keepRender keeps a render that passed every check.
func (m *memory) keepRender(c renderCache) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rendered = c
}

// secrets is what the kept render decrypted (and the one before it).
func (m *memory) secrets() *redact.Set {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rendered.sensitive
}

// failure is the last render that failed for a reason of its revision.
func (m *memory) failure() *renderFailure {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.failed
}

// keepFailure records the outcome of a render of sha: f, its failure, or
// nil, the last render of sha being no longer known to fail.
func (m *memory) keepFailure(sha string, f *renderFailure) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if f != nil || m.failed != nil && m.failed.sha == sha {
		m.failed = f
	}
}

// lastQuiet is the memo the last full tick left (nil: none).
func (m *memory) lastQuiet() *quietMemo {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.quiet
}

// setQuiet replaces the memo (nil drops it).
func (m *memory) setQuiet(q *quietMemo) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.quiet = q
}

// takeDelta returns the memo an incremental tick may build on, and drops
// it: the tick changes it as it goes, and leaves a new one only if it
// succeeds (keepDelta).
func (m *memory) takeDelta() *deltaMemo {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.delta
	m.delta = nil
	return d
}

// peekDelta is the memo, left in place.
func (m *memory) peekDelta() *deltaMemo {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.delta
}

// setDelta replaces the memo (nil drops it); incremental counts a tick
// that was one.
func (m *memory) setDelta(d *deltaMemo, incremental bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.delta = d
	if incremental {
		m.deltaTicks++
	}
}

// incrementalTicks is how many ticks were incremental.
func (m *memory) incrementalTicks() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.deltaTicks
}

// indexOf returns the index of desired, made once per render.
func (m *memory) indexOf(desired []*unstructured.Unstructured) *desiredIndex {
	m.mu.Lock()
	ix := m.index
	m.mu.Unlock()
	if ix != nil && sameSlice(ix.desired, desired) {
		return ix
	}
	ix = newDesiredIndex(desired)
	m.mu.Lock()
	m.index = ix
	m.mu.Unlock()
	return ix
}

// verdictsAt starts a tick at revision rev (verdict.Book.At).
func (m *memory) verdictsAt(rev string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.verdicts.At(rev)
}

// remember records that desired is equivalent to live, and how.
func (m *memory) remember(desired, live *unstructured.Unstructured, how verdict.Verdict) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.verdicts.Remember(objectKey(desired), desired, live, how)
}

// verdict is how desired is known equivalent to live as it is now.
func (m *memory) verdict(desired, live *unstructured.Unstructured) (verdict.Verdict, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.verdicts.Holds(objectKey(desired), desired, live)
}

// writtenAs reports whether live is what recond's last apply of desired
// returned.
func (m *memory) writtenAs(desired, live *unstructured.Unstructured) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.verdicts.Holds(objectKey(desired), desired, live)
	return ok && v == verdict.Written
}

// forget drops what was remembered of u's equivalence.
func (m *memory) forget(u *unstructured.Unstructured) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.verdicts.Forget(objectKey(u))
}

// heldBack reports whether a self-heal write of desired (change c: its
// kind and name) is held back: the object is in a fight whose back-off
// runs, and Git has not changed it since recond last applied it, so the
// write would only undo another manager's change.
func (m *memory) heldBack(kindName string, desired *unstructured.Unstructured) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.heal.BackingOff(kindName); !ok {
		return false
	}
	return m.verdicts.Applied(objectKey(desired), desired)
}

// expireAccepted forgets the dry runs' acceptances too old to trust; once
// per validation, not per object.
func (m *memory) expireAccepted() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.verdicts.Expire(time.Now())
}

// accept records that a dry run accepted the create of desired.
func (m *memory) accept(desired *unstructured.Unstructured) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.verdicts.Accept(objectKey(desired), desired, time.Now())
}

// accepted reports whether a recent dry run accepted desired's create.
func (m *memory) accepted(desired *unstructured.Unstructured) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.verdicts.Accepted(objectKey(desired), desired, time.Now())
}

// created records a desired object written: the server's equivalence,
// by definition (out is what applying it gives), and the end of its
// create's acceptance.
func (m *memory) created(desired, out *unstructured.Unstructured) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := objectKey(desired)
	m.verdicts.Remember(k, desired, out, verdict.Written)
	m.verdicts.Created(k)
}

// changed records a change by another manager (heal.Book.Changed).
func (m *memory) changed(key string, at time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.heal.Changed(key, at)
}

// healed settles a tick's heals (heal.Book.Healed).
func (m *memory) healed(tickStart time.Time, writes []heal.Write, end time.Time) []heal.Heal {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.heal.Healed(tickStart, writes, end)
}

// assess runs fn with the objects' progress, under progressMu only: fn
// may take as long as the assessment of every object, and watch events
// (changed, noticed) take mu meanwhile.
func (m *memory) assess(fn func(*health.Progress)) {
	m.progressMu.Lock()
	defer m.progressMu.Unlock()
	fn(&m.progress)
}

// setHealthy records rev as the last revision found healthy ("": none
// since a new revision started its hooks) and returns the one before.
func (m *memory) setHealthy(rev string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.healthy
	m.healthy = rev
	return old
}

// healthyRevision is the last revision a tick found healthy.
func (m *memory) healthyRevision() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.healthy
}

// readSuspension reads the suspension from cm's annotations (cm nil: no
// inventory, no suspension) at now, with max the longest a suspension may
// last (suspend.Memo.Read).
func (m *memory) readSuspension(cm *unstructured.Unstructured, now time.Time, max time.Duration) suspensionState {
	var ann map[string]string
	rv := ""
	if cm != nil {
		ann, rv = cm.GetAnnotations(), cm.GetResourceVersion()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.suspend.Read(ann, rv, now, max)
}

// lastKnown is the suspension the last tick that read the inventory found
// in force (nil: none).
func (m *memory) lastKnown() *Suspension {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.suspendLast
}

// setLastKnown records the suspension a reading found in force.
func (m *memory) setLastKnown(s *Suspension) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.suspendLast = s
}

// resumed records a Resume by by: no suspension is in force.
func (m *memory) resumed(by string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.resumedBy, m.suspendLast = by, nil
}

// takeResumedBy returns who resumed through Resume since the last call.
func (m *memory) takeResumedBy() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	by := m.resumedBy
	m.resumedBy = ""
	return by
}

// firstWarning reports whether the misspelt opt-out annotation s is seen
// for the first time (and remembers it).
func (m *memory) firstWarning(s string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.misspelt[s] {
		return false
	}
	if m.misspelt == nil {
		m.misspelt = map[string]bool{}
	}
	m.misspelt[s] = true
	return true
}

// restartsSince returns how many of the watch caches' restarts (total,
// from LiveCost, since the start) no tick has counted yet: a cache is
// restarted by the read that finds it stale, within a tick, or by its
// check between ticks (its store found behind), which the next tick
// counts.
func (m *memory) restartsSince(total int64) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := total - m.restarts
	m.restarts = total
	return n
}
