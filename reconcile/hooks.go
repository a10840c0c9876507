package reconcile

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"recond.dev/recond/reconcile/cluster"
	"recond.dev/recond/reconcile/health"
	hookpkg "recond.dev/recond/reconcile/hook"
	"recond.dev/recond/reconcile/keys"
	"recond.dev/recond/reconcile/wave"
	"recond.dev/recond/reconcile/writerule"
)

// The annotations of a chart's hooks (Helm's).
const (
	AnnotationHook       = keys.AnnotationHook
	AnnotationHookWeight = keys.AnnotationHookWeight
	AnnotationHookDelete = keys.AnnotationHookDelete
	// LabelHook marks the hook objects an instance created (value: the
	// instance). They are not owned: never diffed, never pruned.
	LabelHook = keys.LabelHook
)

// Hook delete policies.
const (
	hookBeforeCreation = "before-hook-creation"
	hookSucceeded      = "hook-succeeded"
	hookFailed         = "hook-failed"
)

// DefaultHookTimeout is how long a hook may run before it counts as
// failed (--helm-hook-timeout's default).
const DefaultHookTimeout = 5 * time.Minute

// HookPoll is how soon the loop comes back to a hook that is still
// running (a hook is not an owned object: no watch event asks for it).
const HookPoll = 2 * time.Second

// HookError is a hook that failed or ran out of time: the apply phase
// fails with reason hook, and nothing of the revision's main wave is
// written after a failed pre-hook.
type HookError struct {
	// Hook is "Kind/name", Event what it ran for ("pre-upgrade").
	Hook, Event string
	Err         error
}

func (e *HookError) Error() string {
	if e.Hook == "" {
		return fmt.Sprintf("%s hook: %v", e.Event, e.Err)
	}
	return fmt.Sprintf("%s hook %s: %v", e.Event, e.Hook, e.Err)
}
func (e *HookError) Unwrap() error { return e.Err }

// hookFailure is a hook's own failure (its Job failed, it ran out of
// time), as opposed to a request about it that failed: Classify reports
// the first as reason hook, the second by its own reason.
type hookFailure struct{ msg string }

func (e *hookFailure) Error() string { return e.msg }

// hook is one hook object of the revision.
type hook struct {
	obj      *unstructured.Unstructured
	events   []string
	weight   int
	policies []string
}

func newHook(obj *unstructured.Unstructured) *hook {
	a := obj.GetAnnotations()
	h := &hook{obj: obj}
	for _, e := range strings.Split(a[AnnotationHook], ",") {
		if e = strings.ToLower(strings.TrimSpace(e)); e != "" {
			h.events = append(h.events, e)
		}
	}
	h.weight, _ = strconv.Atoi(strings.TrimSpace(a[AnnotationHookWeight]))
	for _, p := range strings.Split(a[AnnotationHookDelete], ",") {
		if p = strings.TrimSpace(p); p != "" {
			h.policies = append(h.policies, p)
		}
	}
	if len(h.policies) == 0 {
		h.policies = []string{hookBeforeCreation} // Helm's default
	}
	return h
}

func (h *hook) key() string { return h.obj.GetKind() + "/" + h.obj.GetName() }

func (h *hook) policy(p string) bool { return slices.Contains(h.policies, p) }

// hookState is what the inventory records of a revision's hooks.
type hookState = hookpkg.State

// saveHooks writes the inventory with hs as its hook state (a copy of the
// last one written, so that the copy in memory is never changed in place).
func (r *Reconciler) saveHooks(ctx context.Context, st *State, hs *hookState) error {
	cur := st.inv
	n := cur.Copy()
	n.Hooks = hs.Clone()
	if err := (inventoryStore{r}).save(ctx, n); err != nil {
		return err
	}
	st.inv = n
	return nil
}

// runHooks runs the hooks of phase ("pre" or "post") of the revision st
// holds, as far as they go this tick: it starts a weight's hooks once the
// lower weights succeeded, and checks the started ones. It reports whether
// every hook of the phase succeeded. Hooks still running are named in
// st.HooksWaiting (the loop comes back after HookPoll); a failed one is a
// *HookError. The state is saved in the inventory once per weight and
// step (after the weight's hooks were started, after they were checked),
// never once per hook: a revision's hooks cost a bounded number of
// inventory writes, whatever their number.
func (r *Reconciler) runHooks(ctx context.Context, st *State, hs *hookState, phase string) (bool, error) {
	event := phase + "-" + hs.Event
	var list []*hook
	for _, h := range st.Hooks {
		if slices.Contains(h.events, event) {
			list = append(list, h)
		}
	}
	slices.SortStableFunc(list, func(a, b *hook) int {
		return cmp.Or(cmp.Compare(a.weight, b.weight), cmp.Compare(wave.Rank(a.obj.GetKind()), wave.Rank(b.obj.GetKind())), cmp.Compare(a.key(), b.key()))
	})
	timeout := r.cfg.HookTimeout
	if timeout <= 0 {
		timeout = DefaultHookTimeout
	}
	// Before any hook of the phase starts, every one not started yet is
	// judged by the write gate's rules: all the refusals are named at once,
	// and none of the phase's hooks runs.
	var pending []*hook
	for _, h := range list {
		if _, ok := hs.Started[h.key()]; !ok && !slices.Contains(hs.Done, h.key()) {
			pending = append(pending, h)
		}
	}
	var refusals []error
	for _, p := range r.planHooks(ctx, st, pending) {
		if p.err != nil {
			refusals = append(refusals, &HookError{Hook: p.Hook, Event: event, Err: p.err})
		}
	}
	if len(refusals) > 0 {
		return false, rejected(fmt.Sprintf("%d of the revision's %s hooks refused (nothing of the phase started)", len(refusals), event), refusals)
	}
	for i := 0; i < len(list); {
		j := i
		for j < len(list) && list[j].weight == list[i].weight {
			j++
		}
		group := list[i:j]
		i = j
		// Start the weight's hooks not started yet, then record them once.
		started := 0
		var startErr error
		for _, h := range group {
			k := h.key()
			if slices.Contains(hs.Done, k) {
				continue
			}
			if _, ok := hs.Started[k]; ok {
				continue
			}
			if err := st.stopped(); err != nil {
				startErr = err
				break
			}
			if err := r.startHook(ctx, h, hs, event); err != nil {
				startErr = err
				break
			}
			started++
		}
		if started > 0 {
			if err := r.saveHooks(ctx, st, hs); err != nil {
				return false, err
			}
		}
		if startErr != nil {
			return false, startErr
		}
		// Check them all, then record what changed once.
		running := false
		var succeeded []*hook
		var lives []*unstructured.Unstructured
		var failed *HookError
		var failedHook *hook
		var failedLive *unstructured.Unstructured
		for _, h := range group {
			k := h.key()
			if slices.Contains(hs.Done, k) {
				continue
			}
			live, err := r.kube.Get(ctx, h.obj.GroupVersionKind(), h.obj.GetName())
			if err != nil {
				return false, err
			}
			status, why := hookStatus(live)
			if status == health.InProgress && time.Since(hs.Started[k]) > timeout {
				status, why = health.Failed, fmt.Sprintf("still running after %s (--helm-hook-timeout)", timeout)
			}
			switch status {
			case health.Current:
				hs.Done = append(hs.Done, k)
				succeeded, lives = append(succeeded, h), append(lives, live)
				r.log.InfoContext(ctx, "hook succeeded", "hook", k, "event", event, "revision", shortSHA(hs.Revision))
			case health.Failed:
				if failed == nil {
					failed = &HookError{Hook: k, Event: event, Err: &hookFailure{why}}
					failedHook, failedLive = h, live
				}
			default:
				running = true
				st.HooksWaiting = append(st.HooksWaiting, k)
			}
		}
		if failed != nil {
			hs.Phase, hs.Failed, hs.FailedIn = "failed", failed.Error(), phase
		}
		if len(succeeded) > 0 || failed != nil {
			// Recorded before their objects are deleted: a stop in between
			// leaves a hook done, not one whose object is gone.
			if err := r.saveHooks(ctx, st, hs); err != nil {
				return false, err
			}
		}
		for n, h := range succeeded {
			if h.policy(hookSucceeded) {
				if err := r.deleteHook(ctx, h, lives[n]); err != nil {
					return false, err
				}
			}
		}
		if failed != nil {
			if failedHook.policy(hookFailed) && failedLive != nil {
				if err := r.deleteHook(ctx, failedHook, failedLive); err != nil {
					return false, err
				}
			}
			return false, failed
		}
		if running {
			r.TriggerAfter(TriggerHook, HookPoll)
			return false, nil
		}
	}
	return true, nil
}

// deleteHook deletes a hook's live object (its delete policies), through
// the write gate: only a hook of this instance is ever deleted.
func (r *Reconciler) deleteHook(ctx context.Context, h *hook, live *unstructured.Unstructured) error {
	return r.kube.Delete(ctx, cluster.Write{Purpose: cluster.PurposeHook, Live: live})
}

// startHook creates hook h: with before-hook-creation (the default), the
// object a previous run left is deleted first. Both go through the write
// gate as a hook's writes: an object that is not this instance's hook (an
// owned object, another instance's, one made by hand, one marked
// recond.dev/reconcile: disabled, a claim) is never replaced: the hook
// fails with reason invalid, naming it.
func (r *Reconciler) startHook(ctx context.Context, h *hook, hs *hookState, event string) error {
	k := h.key()
	hctx, span := startSpan(ctx, "recond.hook", kindAttr(h.obj.GetKind()), attribute.String("k8s.name", h.obj.GetName()), attribute.String("recond.hook.event", event))
	err := func() error {
		old, err := r.kube.Get(hctx, h.obj.GroupVersionKind(), h.obj.GetName())
		if err != nil {
			return err
		}
		if old != nil && h.policy(hookBeforeCreation) {
			if err := r.kube.Delete(hctx, cluster.Write{Purpose: cluster.PurposeHook, Live: old}); err != nil {
				return err
			}
			if err := r.waitGone(hctx, h); err != nil {
				return err
			}
			old = nil
		}
		_, err = r.kube.ApplyFor(hctx, cluster.Write{Purpose: cluster.PurposeHook, Object: h.obj}, old)
		return err
	}()
	endSpan(span, err)
	if err != nil {
		return &HookError{Hook: k, Event: event, Err: err}
	}
	hs.Started[k] = time.Now().UTC().Truncate(time.Second)
	r.log.InfoContext(ctx, "hook started", "hook", k, "event", event, "revision", shortSHA(hs.Revision))
	return nil
}

// waitGone waits until h's object no longer exists (a deletion a finalizer
// holds ends within the tick, or the tick's deadline does).
func (r *Reconciler) waitGone(ctx context.Context, h *hook) error {
	for {
		live, err := r.kube.Get(ctx, h.obj.GroupVersionKind(), h.obj.GetName())
		if err != nil || live == nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the previous %s is still being deleted: %w", h.key(), ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// hookStatus says whether a hook's live object succeeded (Current), failed
// or is still running (InProgress): a Job by its Complete and Failed
// conditions, anything else by its health.
func hookStatus(live *unstructured.Unstructured) (health.Status, string) {
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

// hooksBefore runs what must run before the revision's main wave: it
// starts the revision's hook run (the first time apply sees a revision
// with hooks) and its pre-hooks. It reports whether the main wave may be
// written.
func (r *Reconciler) hooksBefore(ctx context.Context, st *State) (bool, error) {
	if len(st.Hooks) == 0 || r.cfg.DryRun {
		return true, nil
	}
	hs := st.inv.Hooks.Clone()
	if hs == nil || hs.Revision != st.Revision {
		event := "upgrade"
		if st.inv.Revision == "" {
			event = "install"
		}
		hs = &hookState{Revision: st.Revision, Event: event, Phase: "pre", Started: map[string]time.Time{}}
		r.mem.setHealthy("")
		r.hooksLogged(ctx, st)
		if err := r.saveHooks(ctx, st, hs); err != nil {
			return false, err
		}
	}
	switch hs.Phase {
	case "failed":
		if hs.FailedIn == "post" {
			// The revision was applied in full: it is held (hooksAfter
			// reports the failure).
			return true, nil
		}
		return false, &HookError{Event: hs.Event, Err: &hookFailure{hs.Failed + " (hooks run once per revision: push a new revision)"}}
	case "pre":
		ok, err := r.runHooks(ctx, st, hs, "pre")
		if !ok || err != nil {
			return false, err
		}
		hs.Phase, hs.Started, hs.Done = "main", map[string]time.Time{}, nil
		if err := r.saveHooks(ctx, st, hs); err != nil {
			return false, err
		}
	}
	return true, nil
}

// hooksAfter runs the revision's post-hooks once it was applied in full
// and a tick found it healthy.
func (r *Reconciler) hooksAfter(ctx context.Context, st *State) error {
	hs := st.inv.Hooks.Clone()
	if len(st.Hooks) == 0 || r.cfg.DryRun || hs == nil || hs.Revision != st.Revision || st.inv.Revision != st.Revision {
		return nil
	}
	if hs.Phase == "main" {
		if r.mem.healthyRevision() != st.Revision {
			return nil
		}
		hs.Phase = "post"
		hs.Started, hs.Done = map[string]time.Time{}, nil
	}
	if hs.Phase == "failed" && hs.FailedIn == "post" {
		return &HookError{Event: hs.Event, Err: &hookFailure{hs.Failed + " (hooks run once per revision: push a new revision)"}}
	}
	if hs.Phase != "post" {
		return nil
	}
	ok, err := r.runHooks(ctx, st, hs, "post")
	if !ok || err != nil {
		return err
	}
	hs.Phase, hs.Started, hs.Done = "done", nil, nil
	return r.saveHooks(ctx, st, hs)
}

// hooksLogged says once per revision which hooks it will run.
func (r *Reconciler) hooksLogged(ctx context.Context, st *State) {
	keys := make([]string, 0, len(st.Hooks))
	for _, h := range st.Hooks {
		keys = append(keys, h.key()+" ("+strings.Join(h.events, ",")+")")
	}
	r.log.InfoContext(ctx, "revision has hooks", "revision", shortSHA(st.Revision), "hooks", keys)
}

// The default bounds of a revision's hooks (--helm-hook-max,
// --helm-hook-max-bytes): every hook's state is kept in the inventory
// ConfigMap while its revision's hooks run, so a chart that makes
// thousands of hooks (a `range until` in a template) would make the
// inventory, and etcd, grow with each one.
const (
	DefaultHookMax      = 100
	DefaultHookMaxBytes = 64 << 10
)

// checkHookBudget refuses a revision whose hooks pass the bounds: their
// number, or the size of their state in the inventory once every one has
// started and succeeded. Read fails with reason invalid, before anything
// is written.
func (r *Reconciler) checkHookBudget(hooks []*hook) error {
	max, maxBytes := r.cfg.HookMax, r.cfg.HookMaxBytes
	if max <= 0 {
		max = DefaultHookMax
	}
	if maxBytes <= 0 {
		maxBytes = DefaultHookMaxBytes
	}
	if len(hooks) > max {
		return Invalidf("the revision has %d hooks, more than --helm-hook-max (%d)", len(hooks), max)
	}
	full := &hookState{Revision: strings.Repeat("0", 64), Event: "upgrade", Phase: "post", Started: map[string]time.Time{}}
	at := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, h := range hooks {
		full.Started[h.key()] = at
		full.Done = append(full.Done, h.key())
	}
	if n := len(full.Encode()); n > maxBytes {
		return Invalidf("the revision's %d hooks need %d bytes of state in the inventory, more than --helm-hook-max-bytes (%d)", len(hooks), n, maxBytes)
	}
	return nil
}

// HookPlan is what one hook of a revision would do.
type HookPlan struct {
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
	err     error
}

func (p HookPlan) String() string {
	s := fmt.Sprintf("hook %s (%s, weight %d): creates %s", p.Hook, strings.Join(p.Events, ","), p.Weight, p.Hook)
	if p.Deletes != "" {
		s += ", after deleting the " + p.Deletes + " an earlier run left"
	}
	if p.Refused != "" {
		s += "; refused: " + p.Refused
	}
	return s
}

// planHooks says what each of hooks would do, by the write gate's own
// rules (writerule.Check) over the object each would create and the one it
// would replace: nothing is written.
func (r *Reconciler) planHooks(ctx context.Context, st *State, hooks []*hook) []HookPlan {
	out := make([]HookPlan, 0, len(hooks))
	for _, h := range hooks {
		p := HookPlan{Hook: h.key(), Events: h.events, Weight: h.weight}
		live, err := r.kube.Get(ctx, h.obj.GroupVersionKind(), h.obj.GetName())
		if err == nil {
			if live != nil && h.policy(hookBeforeCreation) {
				p.Deletes = live.GetKind() + "/" + live.GetName()
				err = writerule.Check(r.policy(), cluster.Write{Purpose: cluster.PurposeHook, Verb: cluster.VerbDelete, GVK: live.GroupVersionKind(), Name: live.GetName(), Live: live})
				live = nil
			}
			if err == nil {
				err = writerule.Check(r.policy(), cluster.Write{Purpose: cluster.PurposeHook, Verb: cluster.VerbApply, GVK: h.obj.GroupVersionKind(), Name: h.obj.GetName(), Object: h.obj, Live: live})
			}
		}
		if err != nil {
			p.err, p.Refused = err, err.Error()
		}
		out = append(out, p)
	}
	return out
}
